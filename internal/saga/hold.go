package saga

import (
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// holdsOn reports whether the failure err of step s, for good and taken by
// no catch, holds the saga for an operator rather than compensating it:
// its definition says on_failure: hold, an action's attempt failed (a
// fail step, a false assert or an expression would only fail again), the
// failure is none of those that always compensate, the saga's deadline
// has not passed, and the run is listed (a root or a child saga; a
// branch or an iteration fails its fork, and its parent decides).
func (r *runner) holdsOn(s *planStep, err *StepError) bool {
	st := r.st
	return r.p.def.OnFailure == lang.OnFailureHold && r.failing.Attempt > 0 && r.failing.Step == s.idx &&
		!lang.Uncatchable(err.Type) && err.Type != lang.ErrorTypeDeadline && err.Type != lang.ErrorTypeCancelled &&
		!st.CancelRequested && !r.pastDeadline() && (st.Parent == nil || st.Parent.Saga)
}

// hold parks the saga in status held on the failure err of step s, its
// attempt r.failing: nothing runs until an operator retries the step
// (EventRetry) or compensates (EventCompensate), a cancel compensates, or
// hold_for (or the saga's deadline) passes and it compensates.
func (r *runner) hold(s *planStep, err *StepError) {
	st, cur := r.st, r.failing
	st.Failure = err
	st.Status = durable.StatusHeld
	held := Cursor{Step: cur.Step, Attempt: cur.Attempt, Seq: cur.Seq, Budget: cur.Budget, Unknown: cur.Unknown, Held: true}
	if d := r.p.def.HoldFor; d > 0 {
		held.Due = r.ev.Now.Add(d)
	}
	st.Cursors = append(st.Cursors[:0], held)
	if wake := st.WakeAt(); !wake.IsZero() && wake.Sub(r.ev.Now) <= durable.MaxDelay {
		// Due within what a queue's delay covers: the message is the
		// timer. A later one is the tick's to send, as a wait's is
		// (durable.SagaRecord.WakeAt): a message sent again every 15
		// minutes would cost a read and a send each time.
		r.send(durable.QueueAdvance, s.ID, cur.Attempt, max(wake.Sub(r.ev.Now), 0))
	}
}

// admitHeld checks that an operator's retry or compensate applies: the
// saga is held, and, for a retry, its deadline has not passed (the
// deadline compensates; no attempt starts after it).
func (p *Plan) admitHeld(st *State, ev Event) error {
	cur, ok := st.Pending()
	if st.Status != durable.StatusHeld || !ok || !cur.Held {
		return fmt.Errorf("%w: saga %s is %s; only held sagas are retried or compensated", ErrInvalidEvent, st.SagaID, st.Status)
	}
	if ev.Kind == EventRetry && !st.Deadline.IsZero() && !ev.Now.Before(st.Deadline) {
		return fmt.Errorf("%w: saga %s's deadline %s has passed: it compensates, no attempt starts after it", ErrInvalidEvent, st.SagaID, st.Deadline.UTC().Format(time.RFC3339))
	}
	return nil
}

// retryHeld runs the step a held saga failed on again (EventRetry): its
// next attempt, under the same idempotency key, with the retry policy's
// budget afresh.
func (r *runner) retryHeld() {
	st := r.st
	cur := st.Cursors[0]
	s := r.p.steps[cur.Step]
	next := Cursor{Step: cur.Step, Attempt: cur.Attempt + 1, Seq: cur.Seq, Budget: cur.Attempt, Unknown: cur.Unknown}
	st.Cursors = append(st.Cursors[:0], next)
	st.Failure = nil
	st.Status = durable.StatusRunning
	r.send(durable.QueueAdvance, s.ID, next.Attempt, 0)
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeStarted, Attempt: next.Attempt})
}

// compensateHeld compensates a held saga (EventCompensate), for the
// failure it is held on.
func (r *runner) compensateHeld() {
	st := r.st
	st.Cursors = st.Cursors[:0]
	r.compensate(st.Failure)
}

// holdEnded handles a held saga's timer (EventTimer): its deadline, or
// the end of hold_for. Either way it compensates.
func (r *runner) holdEnded(s *planStep) {
	st := r.st
	st.Cursors = st.Cursors[:0]
	if !st.Deadline.IsZero() && !r.ev.Now.Before(st.Deadline) {
		err := &StepError{Step: s.ID, Type: lang.ErrorTypeDeadline, Message: fmt.Sprintf("saga deadline %s passed while it was held on %s", st.Deadline.UTC().Format(time.RFC3339), s.ID)}
		r.compensate(err)
		return
	}
	r.compensate(st.Failure)
}
