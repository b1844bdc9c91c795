package saga

import (
	"fmt"
	"strconv"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// Call is an action invocation: what a worker runs for a saga's pending cursor.
type Call struct {
	SagaID string // the saga the call runs for
	Step   string // the id of the step the action belongs to
	Action string // the step's action, or its compensation's when Compensation is set
	// Attempt is 1-based; retries of one visit to a step count up.
	Attempt int
	// IdempotencyKey is the same for every attempt and every redelivery of
	// one visit to a step (saga id, step, visit number), so a service that
	// honours it applies the step's effect once. Compensations get their own.
	IdempotencyKey string
	// Input is the step's with (or its compensation's), evaluated; nil
	// when it has none.
	Input any
	// Timeout bounds one attempt; zero means no step timeout.
	Timeout time.Duration
	// Compensation marks a call that undoes the step: it runs the step's
	// compensate action.
	Compensation bool
	// CallbackToken is set for a step with callback: the action starts the
	// work and returns; the step completes when someone completes this
	// token (engine: Coordinator.CompleteCallback). Each attempt has its
	// own, and every redelivery of one attempt the same.
	CallbackToken string
	// CallbackTimeout is how long the token may take, once the action has
	// returned, for a step with callback.
	CallbackTimeout time.Duration
}

// Pending returns the cursor the saga waits on, if any.
func (st *State) Pending() (Cursor, bool) {
	if len(st.Cursors) == 0 {
		return Cursor{}, false
	}
	return st.Cursors[0], true
}

// WakeAt is when the saga's timer is due: the wait a waiting saga waits
// on, or its deadline when that comes first; zero when it waits on no
// timer. Stores index it (durable.SagaRecord.WakeAt), and EventTimer fires
// it.
func (st *State) WakeAt() time.Time {
	cur, ok := st.Pending()
	if ok && cur.Fork && !cur.Compensating && st.Status == durable.StatusWaiting && st.Failure == nil && !st.CancelRequested {
		return st.Deadline // the children run; the saga's deadline stops them
	}
	if ok && cur.Held && st.Status == durable.StatusHeld {
		return earliest(cur.Due, st.Deadline) // hold_for, or the deadline, ends the hold
	}
	if !ok || !cur.Wait || st.Status != durable.StatusWaiting {
		return time.Time{}
	}
	if !st.Deadline.IsZero() && st.Deadline.Before(cur.Due) {
		return st.Deadline
	}
	return cur.Due
}

// earliest is the earlier of a and b, a zero time standing for never.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// DeadlinePassed reports whether the saga has a forward action pending
// that must not run because the saga's deadline has passed at now: an
// attempt no delivery can have run before the deadline, since its message
// was sent to arrive after it (a retry whose backoff passes the deadline
// comes at the deadline plus clockSkew). Any other pending attempt may
// have taken effect in a delivery before the deadline whose outcome was
// never written (a worker that died): it runs again, with its idempotency
// key, so that its outcome is recorded, and compensated if it succeeded;
// the saga's deadline then fails the step after it.
func (st *State) DeadlinePassed(now time.Time) bool {
	cur, ok := st.Pending()
	if !ok || cur.Compensating || cur.Wait || st.CancelRequested || st.Status != durable.StatusRunning ||
		st.Deadline.IsZero() || now.Before(st.Deadline) {
		return false
	}
	for _, m := range st.Outbox {
		if m.Queue == durable.QueueAdvance && m.Attempt == cur.Attempt && !st.UpdatedAt.Add(m.Delay).Before(st.Deadline.Add(clockSkew)) {
			return true
		}
	}
	return false
}

// Awaits names what a pending cursor waits on: its step's id and the
// timeout of the action (or compensation) it runs, zero when none is set.
// The cursor must fit the plan (CheckState).
func (p *Plan) Awaits(cur Cursor) (step string, timeout time.Duration) {
	s := p.steps[cur.Step]
	switch {
	case cur.Compensating && s.comp == nil:
		return s.ID, 0 // a fork undoing a child: the child runs the compensations
	case cur.Compensating && cur.Unknown:
		return s.ID, s.Timeout // finding out: the action again
	case cur.Compensating:
		return s.ID, s.comp.timeout
	}
	return s.ID, s.Timeout
}

// Chains reports whether a pending cursor may run in a chain, from the
// state of the transition before it (docs/PROTOCOL.md, "Chains"): an
// action, a compensation or finding out; never a fork, a wait, or a
// callback step, whose action starts work the saga then waits for. The
// cursor must fit the plan (CheckState).
func (p *Plan) Chains(cur Cursor) bool {
	if cur.Fork || cur.Wait {
		return false
	}
	s := p.steps[cur.Step]
	if cur.Compensating && !cur.Unknown {
		return s.comp != nil
	}
	return s.Callback == nil && s.Action != ""
}

// Call builds the invocation for the saga's pending cursor, evaluating the
// step's with (or its compensation's with, at compensation time, with the
// step's own out visible). An error here is the step's failure: feed it back
// with EventResult and Permanent.
func (p *Plan) Call(st *State, now time.Time) (Call, error) { return p.CallWithin(st, now, 0) }

// CallWithin is Call for an engine that keeps large values as objects
// (Event.OffloadBytes): when offloadBytes is positive, the input built may
// be as large as an object (MaxValueBytes).
func (p *Plan) CallWithin(st *State, now time.Time, offloadBytes int) (Call, error) {
	limit := 0
	if offloadBytes > 0 {
		limit = MaxValueBytes
	}
	cur, ok := st.Pending()
	if !ok {
		return Call{}, fmt.Errorf("%w: saga %s (%s) waits for no action", ErrInvalidEvent, st.SagaID, st.Status)
	}
	if cur.Step < 0 || cur.Step >= len(p.steps) {
		return Call{}, fmt.Errorf("%w: saga %s points at step %d of %d", ErrInvalidEvent, st.SagaID, cur.Step, len(p.steps))
	}
	if cur.Fork {
		return Call{}, fmt.Errorf("%w: saga %s waits on %s, a fork: its children call the actions", ErrInvalidEvent, st.SagaID, p.steps[cur.Step].ID)
	}
	s := p.steps[cur.Step]
	c := Call{SagaID: st.SagaID, Step: s.ID, Action: s.Action, Attempt: cur.Attempt, Timeout: s.Timeout, Compensation: cur.Compensating}
	with, vars := s.args, st.Vars
	dropped := false
	inputAttempt := c.Attempt // the attempt expressions see as saga.attempt
	if cur.Compensating && cur.Unknown {
		// Finding out what an attempt that ran into its deadline did: the
		// action again, under its key, numbered after its attempts.
		// The input is the one the attempts had, kept when the step went
		// on the stack; evaluated again (as the last attempt) if it could
		// not be kept. The token is the last attempt's.
		c.Compensation = false
		c.IdempotencyKey = idempotencyKey(st.SagaID, s.ID, cur.Seq)
		last := 0
		for _, done := range st.Stack {
			if done.Seq == cur.Seq && done.Step == cur.Step {
				last = done.Attempts
				c.Attempt = done.Attempts + cur.Attempt
				if done.HasInput {
					with, c.Input = nil, done.Input
				}
			}
		}
		inputAttempt = last
		if s.Callback != nil {
			c.CallbackToken, c.CallbackTimeout = p.callbackTokenFor(st, cur.Step, cur.Seq, last), callbackTimeout(s)
		}
	} else if cur.Compensating {
		c.Action, c.Timeout, with = s.comp.action, s.comp.timeout, s.comp.with
		c.IdempotencyKey = idempotencyKey(st.SagaID, s.ID+".compensate", cur.Seq)
		for _, done := range st.Stack {
			if done.Seq == cur.Seq && done.HasOut {
				vars = overlay(st.Vars, s.Out, done.Out)
			}
			if done.Seq == cur.Seq && done.OutDropped {
				dropped = true
			}
		}
	} else {
		c.IdempotencyKey = idempotencyKey(st.SagaID, s.ID, cur.Seq)
		if s.Callback != nil {
			c.CallbackToken, c.CallbackTimeout = p.CallbackToken(st), callbackTimeout(s)
		}
	}
	if dropped && s.Out != "" {
		// The var holds nothing of this visit: whatever it holds now was
		// written by another step, or another visit. Never build the
		// compensation from it.
		vars = without(vars, s.Out)
	}
	if with != nil {
		act := &activation{st: st, vars: vars, attempt: int64(inputAttempt), now: now, limit: limit}
		in, err := with.eval(act)
		if err != nil && dropped {
			return c, &ActionError{Type: ErrorType(err), Message: fmt.Sprintf("compensate.with: the action succeeded but its output could not be kept (vars.%s was never written), so its compensation cannot be built; undo it by hand (idempotency key %s), then resume with --skip: %s",
				s.Out, idempotencyKey(st.SagaID, s.ID, cur.Seq), errorMessage(err))}
		}
		if err != nil {
			field := "with"
			if cur.Compensating {
				field = "compensate.with"
			}
			// The step is the failure's own field: name the field only, and
			// keep the error's type once.
			return c, &ActionError{Type: ErrorType(err), Message: field + ": " + errorMessage(err)}
		}
		c.Input = in
	}
	return c, nil
}

func idempotencyKey(sagaID, step string, seq uint64) string {
	var buf [256]byte
	b := append(buf[:0], sagaID...)
	b = append(b, '/')
	b = append(b, step...)
	b = append(b, '/')
	return string(strconv.AppendUint(b, seq, 10))
}

func without(vars map[string]any, name string) map[string]any {
	m := make(map[string]any, len(vars))
	for k, x := range vars {
		if k != name {
			m[k] = x
		}
	}
	return m
}

func overlay(vars map[string]any, name string, v any) map[string]any {
	m := make(map[string]any, len(vars))
	for k, x := range vars {
		m[k] = x
	}
	m[name] = v
	return m
}
