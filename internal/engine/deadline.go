package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// The deadline rules of an invocation: how much time a record needs to
// start (timeLeft), when a record is handed back to a fresh invocation
// rather than cut short (WithInvocationBudget, NoTimeToStart,
// HandBack), and when an action's context ends (actionContext). The
// reserves themselves (saga.ResultReserve, saga.StartReserve) are the validator's
// too: a step timeout must fit a fresh invocation.

// timeLeft reports ErrNoTime when the invocation has too little left to run
// the pending attempt and record its outcome: under saga.ResultReserve, or
// under the step's timeout plus saga.ResultReserve when a fresh invocation
// (WithInvocationBudget) would give that much. A record after slow ones in
// a batch is then handed back rather than cut short.
func (c *Coordinator) timeLeft(ctx context.Context, plan *saga.Plan, cur saga.Cursor, msg durable.Message) error {
	dl, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	left := time.Until(dl)
	need := saga.ResultReserve
	_, t := plan.Awaits(cur)
	// Only when a fresh invocation surely has the time, with room to load
	// the saga: else the fresh one would hand it back too, forever.
	if budget, ok := ctx.Value(budgetKey{}).(time.Duration); ok && t > 0 && t+saga.ResultReserve+handBackSlack <= budget {
		need += t
	}
	if left > saga.ResultReserve && left >= need {
		return nil
	}
	return fmt.Errorf("saga %s: %w: %s left before the invocation's deadline, %s needed to run %s and record it", msg.SagaID, ErrNoTime, left.Round(time.Millisecond), need, msg.Step)
}

// handBackSlack is what a fresh invocation may spend before an attempt
// starts: a step is handed back for its timeout only if a fresh invocation
// has that much more. Validation keeps step timeouts within it
// (saga.StepTimeoutLimit).
const handBackSlack = saga.StartReserve

type budgetKey struct{}

// WithInvocationBudget tells the coordinator how long a fresh invocation of
// the function runs (its timeout, less its start-up): an attempt whose step
// timeout fits a fresh invocation but not what is left of this one is
// handed back (ErrNoTime) instead of being cut short.
func WithInvocationBudget(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, budgetKey{}, d)
}

// NoTimeToStart reports whether a record should be handed back rather
// than started: the invocation has less than margin left, and a fresh one
// would give the record more. A fresh invocation (within handBackSlack of
// its start) never hands back, so a record is never handed from one
// fresh invocation to the next forever. Without a deadline it is false;
// without WithInvocationBudget, a fresh invocation is taken to have more.
func NoTimeToStart(ctx context.Context, margin time.Duration) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return false
	}
	left := time.Until(dl)
	if left >= margin {
		return false
	}
	budget, ok := ctx.Value(budgetKey{}).(time.Duration)
	return !ok || budget-left >= handBackSlack
}

// HandBack sends msg again at once, for a message handled later by a fresh
// invocation (after ErrNoTime): the copy is delivered anew, so the
// original can be deleted without spending its receive count.
func (c *Coordinator) HandBack(ctx context.Context, msg durable.Message) error {
	msg.Delay = 0
	return c.cfg.Queue.Send(ctx, []durable.Message{msg})
}

// actionContext is the context an action runs in: it ends
// saga.ResultReserve before the invocation's, so that the action's
// outcome, whatever it is, is always written and sent; or at the step's
// timeout, if that comes first. cutByInvocation: the invocation's end
// comes first.
func actionContext(ctx context.Context, timeout time.Duration) (_ context.Context, _ context.CancelFunc, cutByInvocation bool) {
	var stop time.Time
	base := ctx
	if dl, ok := ctx.Deadline(); ok {
		stop, cutByInvocation = dl.Add(-saga.ResultReserve), true
		base = context.WithoutCancel(ctx) // the earlier deadline is set below
	}
	if timeout > 0 {
		if t := time.Now().Add(timeout); stop.IsZero() || t.Before(stop) {
			stop, cutByInvocation = t, false
		}
	}
	if stop.IsZero() {
		return ctx, func() {}, false
	}
	actx, cancel := context.WithDeadline(base, stop)
	return actx, cancel, cutByInvocation
}
