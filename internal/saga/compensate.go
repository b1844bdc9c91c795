package saga

import (
	"fmt"

	"github.com/lambdasaga/lambdasaga/durable"
)

// compensate starts undoing the completed steps, newest first.
func (r *runner) compensate(cause *StepError) {
	st := r.st
	st.Failure = cause
	st.CancelRequested = false
	st.Status = durable.StatusCompensating
	st.Cursors = st.Cursors[:0]
	r.nextCompensation()
}

func (r *runner) nextCompensation() {
	st := r.st
	if len(st.Stack) == 0 {
		st.Status = durable.StatusCompensated
		st.Cursors = st.Cursors[:0]
		return
	}
	top := st.Stack[len(st.Stack)-1]
	if top.Children > 0 {
		// A fork that succeeded: its children are undone, the last first.
		r.undoChild(r.p.steps[top.Step], Cursor{Step: top.Step, Attempt: 1, Seq: top.Seq, Fork: true, Children: top.Children, Child: top.Children - 1})
		return
	}
	st.Cursors = append(st.Cursors[:0], Cursor{Step: top.Step, Attempt: 1, Seq: top.Seq, Compensating: true, Unknown: top.Unknown})
	s := r.p.steps[top.Step]
	r.send(durable.QueueCompensate, s.ID, 1, 0)
	if top.Unknown {
		// Its outcome is found out first: the action again, under its key.
		r.remember(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeStarted, Attempt: top.Attempts + 1})
		return
	}
	// The history shows the compensation start, as it shows an action's;
	// observers hear of compensations when they end.
	r.remember(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeStarted, Attempt: 1, Compensation: true})
}

func (r *runner) compensationResult() {
	st, ev := r.st, r.ev
	cur := st.Cursors[0]
	s := r.p.steps[cur.Step]
	if cur.Unknown {
		r.foundOut(s, cur)
		return
	}
	if ev.Err == nil {
		st.Stack = st.Stack[:len(st.Stack)-1]
		r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompensated, Attempt: cur.Attempt, Compensation: true})
		r.nextCompensation()
		return
	}
	typ := ErrorType(ev.Err)
	se := newStepError(s.ID, typ, errorMessage(ev.Err))
	if r.retryable(s.comp.retry, cur.Attempt, ev.Err, typ) {
		r.retry(s, s.comp.retry, cur, durable.QueueCompensate, true, se)
		return
	}
	st.Status = durable.StatusCompensationFailed
	st.CompensationError = se
	st.Cursors = st.Cursors[:0]
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompensationFailed, Attempt: cur.Attempt, Compensation: true, Error: se})
}

// findingOutAttempt is the number the action's attempt cur, finding out
// the outcome of the stack's top entry, has: after the attempts that ran
// forward.
func (r *runner) findingOutAttempt(cur Cursor) int {
	if n := len(r.st.Stack); n > 0 {
		return r.st.Stack[n-1].Attempts + cur.Attempt
	}
	return cur.Attempt
}

// foundOut takes the answer of the action run again, under its key, to
// find out what an attempt that ran into its deadline did. A success: the
// step took effect, and is compensated next (its output kept for the
// compensation, as a loop step's is). A definite failure: it took none,
// and the compensation goes on below it. No answer (a Timeout, a service
// that fails and may come back): asked again under the compensation's
// retry policy, which no saga deadline bounds; when that runs out, the
// saga parks as compensation_failed for an operator, who finds it out by
// hand and resumes (asking again) or skips it (it took no effect, or was
// undone by hand).
func (r *runner) foundOut(s *planStep, cur Cursor) {
	st, ev := r.st, r.ev
	n := len(st.Stack)
	attempt := r.findingOutAttempt(cur)
	if bad := asInvalidOutput(ev.Err); ev.Err == nil || bad != nil {
		// A success, even with an output state cannot hold: the step took
		// effect (its compensation then cannot read that output).
		top := &st.Stack[n-1]
		top.Unknown, top.Attempts, top.Input, top.HasInput = false, 0, nil, false
		out, err := CheckValue(ev.Output)
		if bad != nil {
			out, err = nil, bad
		}
		if s.Out != "" {
			top.Out, top.HasOut, top.OutDropped = out, err == nil, err != nil
			if err == nil && !r.fitsWithin(maxSettledStateBytes-settledHeadroom) {
				top.Out, top.HasOut, top.OutDropped = nil, false, true
			}
		}
		r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompleted, Attempt: attempt})
		r.nextCompensation()
		return
	}
	typ := ErrorType(ev.Err)
	se := newStepError(s.ID, typ, errorMessage(ev.Err))
	if definite(s.policy, ev.Err, typ) {
		st.Stack = st.Stack[:n-1]
		r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeFailed, Attempt: attempt, Error: se})
		r.nextCompensation()
		return
	}
	if r.retryable(s.comp.retry, cur.Attempt, ev.Err, typ) {
		r.retry(s, s.comp.retry, cur, durable.QueueCompensate, true, se)
		return
	}
	st.Status = durable.StatusCompensationFailed
	st.CompensationError = &StepError{Step: s.ID, Type: typ, Message: fmt.Sprintf("the outcome of %s is unknown: an attempt ran into its deadline, and asked again under its idempotency key %s the service gave no answer (attempt %d: %s); find out what it did, then resume (asks again) or resume --skip (it took no effect, or you undid it)",
		s.ID, idempotencyKey(st.SagaID, s.ID, cur.Seq), attempt, se.Message)}
	st.Stack[n-1].Attempts = attempt // a resume asks again after these
	st.Cursors = st.Cursors[:0]
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompensationFailed, Attempt: cur.Attempt, Compensation: true, Error: st.CompensationError})
}
