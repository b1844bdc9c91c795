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
// rather than cut short (WithInvocationBudget, FreshWouldHaveMore,
// HandBack). The reserves
// themselves (saga.ResultReserve, saga.StartReserve) are the validator's
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

// FreshWouldHaveMore reports whether a fresh invocation would give a record
// more time than the left of this one: handing a record back helps only
// then. It is false while this invocation is itself fresh (within
// handBackSlack of its start), so a record is never handed back from one
// fresh invocation to the next forever; without WithInvocationBudget it is
// true.
func FreshWouldHaveMore(ctx context.Context, left time.Duration) bool {
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
