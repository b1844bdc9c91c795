package console

import (
	"context"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Source is what the console reads and acts through: a deployed stack, the
// local loop or an in-process runtime. Every method takes the request's
// context. A saga that does not exist is durable.ErrNotFound (the console
// answers 404); other errors are shown to the operator as they are.
type Source interface {
	// List pages through sagas, newest StatusSince first
	// (durable.SagaListParams).
	List(ctx context.Context, p *durable.SagaListParams) (*durable.SagaListResult, error)
	// Get reads a saga's state.
	Get(ctx context.Context, sagaID string) (*saga.State, error)
	// History returns what happened to a saga, oldest first; empty when
	// nothing is known beyond its state.
	History(ctx context.Context, sagaID string) ([]Entry, error)
	// Plan returns the compiled definition of a definition hash
	// (saga.State.DefinitionHash).
	Plan(ctx context.Context, hash string) (*saga.Plan, error)
	// Cancel stops a running saga; it compensates
	// (engine.Coordinator.Cancel).
	Cancel(ctx context.Context, sagaID string) (*saga.State, error)
	// Resume continues a saga parked in compensation_failed
	// (engine.Coordinator.Resume).
	Resume(ctx context.Context, sagaID string) (*saga.State, error)
	// Retry runs the step a held saga failed on again
	// (engine.Coordinator.Retry).
	Retry(ctx context.Context, sagaID string) (*saga.State, error)
	// Compensate compensates a held saga (engine.Coordinator.Compensate).
	Compensate(ctx context.Context, sagaID string) (*saga.State, error)
	// Signal sends a saga a signal (engine.Coordinator.Signal).
	Signal(ctx context.Context, p *engine.SignalParams) (*engine.Delivered, error)
	// CompleteCallback completes a callback token with the step's output
	// (engine.Coordinator.CompleteCallback).
	CompleteCallback(ctx context.Context, token string, output any) (*engine.Delivered, error)
	// FailCallback fails a callback token's attempt with an error type
	// and a message (engine.Coordinator.FailCallback).
	FailCallback(ctx context.Context, token, errorType, message string) (*engine.Delivered, error)
}

// Entry is one transition of a saga's history, as the console shows it.
type Entry struct {
	Time         time.Time     // when it happened; zero when not known
	Step         string        // the step's id; empty for the saga as a whole
	Kind         string        // the step's kind (lang.StepKind), or "saga"
	Attempt      int           // the attempt, from 1; 0 when none applies
	Outcome      string        // saga.StepOutcome for a step; a status or "started" for the saga
	Compensation bool          // the entry is of the step's compensation
	ErrorType    string        // for failures
	ErrorMessage string        // for failures
	Duration     time.Duration // how long the action ran; zero when not known
	Version      uint64        // the saga's version the transition wrote; 0 when not known
	Actor        string        // who acted from outside (an operator's cancel, a signal); empty for the workers
	// Fork is, for an entry of a fork step (parallel, foreach, saga), its
	// visit and children, which name its child runs (durable.ChildID);
	// nil when not known.
	Fork *saga.HistoryFork
}

// Coordinator is a Source over an engine.Coordinator and the plans of its
// store: what an in-process runtime (embedded.Runtime.Coordinator) or a
// client is built on.
type Coordinator struct {
	Coord *engine.Coordinator // required
	Plans *engine.Plans       // required: engine.NewPlans on the coordinator's store
	// Recorder, when set, is the history of a saga whose state keeps
	// none (written before histories were kept): the step events it
	// heard from the coordinator's OnStep. The history is StateHistory
	// otherwise.
	Recorder *Recorder
}

var _ Source = (*Coordinator)(nil)

// List implements Source.
func (c *Coordinator) List(ctx context.Context, p *durable.SagaListParams) (*durable.SagaListResult, error) {
	return c.Coord.List(ctx, p)
}

// Get implements Source.
func (c *Coordinator) Get(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.Coord.Get(ctx, sagaID)
}

// History implements Source: what the Recorder heard, or else what the
// saga's state alone tells (StateHistory). The store keeps no history of
// its own yet.
func (c *Coordinator) History(ctx context.Context, sagaID string) ([]Entry, error) {
	st, err := c.Coord.Get(ctx, sagaID)
	if err != nil {
		return nil, err
	}
	if c.Recorder != nil && len(st.History) == 0 {
		return c.Recorder.History(sagaID), nil
	}
	plan, err := c.Plans.Get(ctx, st.DefinitionHash)
	if err != nil {
		return nil, err
	}
	return StateHistory(plan, st), nil
}

// Plan implements Source.
func (c *Coordinator) Plan(ctx context.Context, hash string) (*saga.Plan, error) {
	return c.Plans.Get(ctx, hash)
}

// Cancel implements Source.
func (c *Coordinator) Cancel(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.Coord.Cancel(ctx, sagaID)
}

// Resume implements Source.
func (c *Coordinator) Resume(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.Coord.Resume(ctx, sagaID)
}

// Retry implements Source.
func (c *Coordinator) Retry(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.Coord.Retry(ctx, sagaID)
}

// Compensate implements Source.
func (c *Coordinator) Compensate(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.Coord.Compensate(ctx, sagaID)
}

// Signal implements Source.
func (c *Coordinator) Signal(ctx context.Context, p *engine.SignalParams) (*engine.Delivered, error) {
	return c.Coord.Signal(ctx, p)
}

// CompleteCallback implements Source.
func (c *Coordinator) CompleteCallback(ctx context.Context, token string, output any) (*engine.Delivered, error) {
	return c.Coord.CompleteCallback(ctx, token, output)
}

// FailCallback implements Source.
func (c *Coordinator) FailCallback(ctx context.Context, token, errorType, message string) (*engine.Delivered, error) {
	return c.Coord.FailCallback(ctx, token, errorType, message)
}

// StateHistory is the saga's history, as its state keeps it
// (saga.State.HistoryEntries): every transition's steps, the newest
// within the history's bound. A saga written before histories were kept
// has none: then it is what the state alone tells (derivedHistory).
func StateHistory(plan *saga.Plan, st *saga.State) []Entry {
	hs, _ := st.HistoryEntries(plan) // a damaged tail: what was read before it
	if len(hs) == 0 && st.HistoryDropped == 0 {
		return derivedHistory(plan, st)
	}
	out := make([]Entry, 0, len(hs))
	for _, h := range hs {
		e := Entry{Time: h.At, Step: h.Step, Kind: string(h.Kind), Attempt: h.Attempt, Outcome: string(h.Outcome), Compensation: h.Compensation, Version: h.Version}
		if h.StepIndex < 0 {
			e.Kind, e.Outcome = "saga", string(h.Status)
			if h.Signal != "" {
				e.Outcome = "kept signal " + h.Signal
			}
		}
		if h.Error != nil {
			e.ErrorType, e.ErrorMessage = h.Error.Type, h.Error.Message
		}
		if h.Timed {
			e.Duration = h.Took
		}
		if h.FromOutside() {
			e.Actor = h.Cause.String()
		}
		e.Fork = h.Fork
		out = append(out, e)
	}
	return out
}

// derivedHistory is the history a saga's state alone tells, for a saga
// that keeps none: the start, the completed steps still on the
// compensation stack, the failure, the pending work, the parked
// compensation and the current status. Only the start and the status
// carry a time; the steps that kept no compensation and the compensations
// already done leave no trace in the state, so they are missing.
func derivedHistory(plan *saga.Plan, st *saga.State) []Entry {
	out := []Entry{{Time: st.CreatedAt, Kind: "saga", Outcome: "started"}}
	stepKind := func(idx int) (string, string) {
		steps := plan.Steps()
		if idx < 0 || idx >= len(steps) {
			return "", ""
		}
		return steps[idx].ID, string(steps[idx].Kind)
	}
	for _, c := range st.Stack {
		id, kind := stepKind(c.Step)
		e := Entry{Step: id, Kind: kind, Attempt: 1, Outcome: string(saga.OutcomeCompleted)}
		if lang.IsFork(lang.StepKind(kind)) {
			e.Fork = &saga.HistoryFork{Seq: c.Seq, Children: c.Children}
		}
		out = append(out, e)
	}
	if f := st.Failure; f != nil {
		e := Entry{Step: f.Step, Outcome: string(saga.OutcomeFailed), ErrorType: f.Type, ErrorMessage: f.Message}
		if s, ok := plan.Step(f.Step); ok {
			e.Kind = string(s.Kind)
		}
		out = append(out, e)
	}
	if cur, ok := st.Pending(); ok {
		id, kind := stepKind(cur.Step)
		e := Entry{Step: id, Kind: kind, Attempt: cur.Attempt, Outcome: string(saga.OutcomeStarted), Compensation: cur.Compensating, Version: st.Version}
		if cur.Wait {
			e.Outcome = string(saga.OutcomeWaiting)
		}
		out = append(out, e)
	}
	if ce := st.CompensationError; ce != nil {
		e := Entry{Step: ce.Step, Outcome: string(saga.OutcomeCompensationFailed), Compensation: true, ErrorType: ce.Type, ErrorMessage: ce.Message}
		if s, ok := plan.Step(ce.Step); ok {
			e.Kind = string(s.Kind)
		}
		out = append(out, e)
	}
	return append(out, Entry{Time: st.StatusSince, Kind: "saga", Outcome: string(st.Status), Version: st.Version})
}

// Recorder keeps, in memory, the step events a coordinator in this
// process reports (engine.CoordinatorConfig.OnStep,
// embedded.Config.OnStep) as history entries: the history of the sagas an
// in-process runtime ran, for as long as the process lives. It is safe
// for concurrent use.
type Recorder struct {
	// Now stamps the entries; default time.Now.
	Now func() time.Time

	mu      sync.Mutex
	entries map[string][]Entry
}

// OnStep records one step event; pass it as the coordinator's OnStep.
func (r *Recorder) OnStep(ev engine.StepEvent) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	e := Entry{Time: now(), Step: ev.Step, Kind: string(ev.Kind), Attempt: ev.Attempt, Outcome: string(ev.Outcome),
		Compensation: ev.Compensation, Duration: ev.Duration, Version: ev.Version}
	if ev.Error != nil {
		e.ErrorType, e.ErrorMessage = ev.Error.Type, ev.Error.Message
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries == nil {
		r.entries = map[string][]Entry{}
	}
	r.entries[ev.SagaID] = append(r.entries[ev.SagaID], e)
}

// History returns a copy of the entries recorded for a saga, oldest
// first; nil when none were.
func (r *Recorder) History(sagaID string) []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Entry(nil), r.entries[sagaID]...)
}
