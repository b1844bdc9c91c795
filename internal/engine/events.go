package engine

import (
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// StepEvent tells an observer about one step of a saga.
type StepEvent struct {
	SagaID   string // the saga the step belongs to
	SagaName string // its definition's name
	Version  uint64 // the version the transition wrote
	// Status is the saga's status once the transition is written, the
	// same for every event of one transition (metrics count how sagas end
	// by it).
	Status durable.Status
	// StepRecord's Error is shown as the plan's saga.Redactor shows it:
	// no secret input in it.
	saga.StepRecord
	// Duration is how long the action ran, for the step whose action this
	// transition ran; zero for pure steps.
	Duration time.Duration
}

type stepTiming struct {
	step string
	comp bool
	took time.Duration
}

// heard holds the step events of a transition until it is written (see
// write).
type heard struct {
	c      *Coordinator
	st     *saga.State
	events []StepEvent
}

// observer returns the OnStep of a transition of st, a run of plan,
// reporting to h; nil when nobody listens. An event's error is shown as
// plan's Redactor shows it: observers print and keep what they hear.
func (c *Coordinator) observer(plan *saga.Plan, h *heard, sagaID string, st *saga.State, timing *stepTiming) func(saga.StepRecord) {
	if c.cfg.OnStep == nil {
		return nil
	}
	h.c, h.st, h.events = c, st, h.events[:0]
	if h.events == nil {
		// One allocation for the few events of a typical transition (a
		// step's outcome, the pure steps after it, the next start),
		// rather than one per doubling.
		h.events = make([]StepEvent, 0, 4)
	}
	return func(rec saga.StepRecord) {
		if rec.Error != nil {
			rec.Error = plan.Redactor(st).StepError(rec.Error) // st has its input by now: Advance sets it first
		}
		ev := StepEvent{SagaID: sagaID, SagaName: st.Name, Version: st.Version, StepRecord: rec}
		if timing != nil && rec.Step == timing.step && rec.Compensation == timing.comp && rec.Outcome != saga.OutcomeStarted {
			ev.Duration = timing.took
		}
		h.events = append(h.events, ev)
	}
}

// report hands the held events to OnStep.
func (h *heard) report() {
	if h == nil || h.c == nil {
		return
	}
	for _, ev := range h.events {
		ev.Status = h.st.Status
		h.c.cfg.OnStep(ev)
	}
	h.events = h.events[:0]
}

// writing notes that a write of the saga begins, before the store is
// asked; heardAll, called after, that its events have been handed to
// OnStep (or never will be). Without OnStep neither notes anything, and
// neither allocates: every write of a function that emits metrics passes
// here.
func (c *Coordinator) writing(sagaID string) {
	if c.cfg.OnStep == nil {
		return
	}
	c.unheardMu.Lock()
	if c.unheard == nil {
		c.unheard = map[string]int{}
	}
	c.unheard[sagaID]++
	c.unheardMu.Unlock()
}

func (c *Coordinator) heardAll(sagaID string) {
	if c.cfg.OnStep == nil {
		return
	}
	c.unheardMu.Lock()
	if c.unheard[sagaID]--; c.unheard[sagaID] <= 0 {
		delete(c.unheard, sagaID)
	}
	c.unheardMu.Unlock()
}

// Unreported reports whether this coordinator is writing a transition of
// the saga whose step events OnStep has not heard yet. A caller that read
// the saga's state and then sees false knows OnStep has heard every step
// that state records, if this coordinator wrote it.
func (c *Coordinator) Unreported(sagaID string) bool {
	c.unheardMu.Lock()
	defer c.unheardMu.Unlock()
	return c.unheard[sagaID] > 0
}
