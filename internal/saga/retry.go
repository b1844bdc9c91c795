package saga

import (
	"slices"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// clockSkew is how far apart the clocks of a worker that scheduled a retry
// and of whoever cancels may be, at most.
const clockSkew = 5 * time.Second

// pendingRetryDue reports when the pending action's retry becomes visible
// to workers, for an attempt after the first sent with a delay by the last
// transition: not before its write plus the delay.
func pendingRetryDue(st *State) (time.Time, bool) {
	cur, ok := st.Pending()
	if !ok || cur.Compensating || cur.Attempt < 2 {
		return time.Time{}, false
	}
	for _, m := range st.Outbox {
		if m.Queue == durable.QueueAdvance && m.Attempt == cur.Attempt && m.Delay > 0 {
			return st.UpdatedAt.Add(m.Delay), true
		}
	}
	return time.Time{}, false
}

// definite reports whether err, an attempt's failure, is the service's
// answer that the call took no effect: permanent, by the error or by the
// policy's list. Any other failure may be a service that did not answer;
// so is a Timeout, even listed as permanent, and a failure the engine
// made without calling the service (the input could not be built, the
// action is not registered here).
func definite(pol lang.RetryPolicy, err error, typ string) bool {
	switch typ {
	case lang.ErrorTypeTimeout, lang.ErrorTypeExpression, lang.ErrorTypeActionNotFound, lang.ErrorTypeStateTooLarge:
		return false
	}
	return IsPermanent(err) || slices.Contains(pol.Permanent, typ)
}

func (r *runner) retryable(pol lang.RetryPolicy, attempt int, err error, typ string) bool {
	return !IsPermanent(err) && !slices.Contains(pol.Permanent, typ) && attempt < pol.Attempts
}

func (r *runner) retry(s *planStep, pol lang.RetryPolicy, cur Cursor, q durable.QueueName, comp bool, se *StepError) {
	cur.Attempt++
	if !comp {
		// Unknown until an attempt answers: a retryable failure after a
		// Timeout says nothing of what the attempt before it did.
		cur.Unknown = cur.Unknown || se != nil && se.Type == lang.ErrorTypeTimeout
	}
	d := backoff(pol, cur.Attempt-cur.Budget, r.ev.Rand)
	if dl := r.st.Deadline; !comp && !dl.IsZero() && r.ev.Now.Add(d).After(dl) {
		// The saga's deadline comes first: the retry's message comes just
		// after it (by clockSkew, so that no worker whose clock is behind
		// takes it for before), and finds the deadline passed (EventTimer)
		// rather than running the action late (State.DeadlinePassed).
		d = min(max(dl.Sub(r.ev.Now), 0)+clockSkew, durable.MaxDelay)
	}
	r.st.Cursors[0] = cur
	r.send(q, s.ID, cur.Attempt, d)
	attempt, asComp := cur.Attempt-1, comp
	if comp && cur.Unknown {
		// Finding out: the action's own attempts, numbered after the ones
		// that ran forward.
		attempt, asComp = r.findingOutAttempt(cur)-1, false
	}
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeRetrying, Attempt: attempt, Compensation: asComp, Delay: d, Error: se})
}

// backoff is the delay before attempt (2 or more) under pol: backoff
// doubling per attempt, capped at max_backoff, and with jitter drawn from
// rand in [0, 1) spread over the upper half, so a retry is never immediate.
func backoff(pol lang.RetryPolicy, attempt int, rand float64) time.Duration {
	d := pol.Backoff
	maxD := pol.MaxBackoff
	if maxD <= 0 || maxD > durable.MaxDelay {
		maxD = durable.MaxDelay
	}
	for i := 2; i < attempt && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	if pol.Jitter && d > 1 {
		half := d / 2
		d = half + time.Duration(float64(d-half)*min(max(rand, 0), 1))
	}
	return d
}
