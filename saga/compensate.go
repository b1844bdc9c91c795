package saga

import "github.com/lambdasaga/lambdasaga/durable"

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
	st.Cursors = append(st.Cursors[:0], Cursor{Step: top.Step, Attempt: 1, Seq: top.Seq, Compensating: true})
	s := r.p.steps[top.Step]
	r.send(durable.QueueCompensate, s.ID, 1, 0)
	// The history shows the compensation start, as it shows an action's;
	// observers hear of compensations when they end.
	r.remember(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeStarted, Attempt: 1, Compensation: true})
}

func (r *runner) compensationResult() {
	st, ev := r.st, r.ev
	cur := st.Cursors[0]
	s := r.p.steps[cur.Step]
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
