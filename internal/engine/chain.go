package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Chains (docs/PROTOCOL.md, "Chains"): after a message's step is written,
// the steps ready at once run from the state the worker holds, one write
// each, and only the last version's outbox is sent. The message that
// started the chain is its carrier: every version it writes, its own
// step's and the chain's, names it (saga.State.Carrier), so that the
// carrier, coming back after a crash, sends the stored outbox rather than
// being dropped; and a cancel that lands on any of them keeps it.

const (
	// DefaultChainSteps is how many steps a message runs after its own
	// when CoordinatorConfig.ChainSteps is zero.
	DefaultChainSteps = 50
	// DefaultChainTime is how long a chain goes on starting steps when
	// CoordinatorConfig.ChainTime is zero.
	DefaultChainTime = 5 * time.Second
)

const (
	// HandledChained is the outcome logged for each step a chain runs
	// after the message's own (the message itself is HandledStep).
	HandledChained Outcome = "chained"
	// HandledCarrier: the message carried a chain that stopped before
	// its last outbox was surely sent (its worker died): it sent the
	// stored outbox again.
	HandledCarrier Outcome = "carrier"
)

// Batch is what a worker tells the coordinator of the batch a record
// comes in, to bound its chain: the caller sets it before each record.
type Batch struct {
	// Waiting counts the records of the batch after this one: with n
	// waiting, a chain stops after ChainTime/(n+1), so that they do not
	// wait behind it.
	Waiting int
	// Visibility is how long the record stays hidden (zero: unknown, as
	// in Lambda, whose deadline bounds the chain): a chain stops starting
	// steps once half of it has passed since Received, so that its
	// carrier does not show again while it runs.
	Visibility time.Duration
	// Received is when the batch was received, on the coordinator's
	// clock: the record's visibility timeout runs from then, and half of
	// it counts from then. Zero: from the start of the chain.
	Received time.Time
}

type batchKey struct{}

// WithBatch returns a context that tells the coordinator of the batch b
// describes.
func WithBatch(ctx context.Context, b *Batch) context.Context {
	return context.WithValue(ctx, batchKey{}, b)
}

// chainBudget is how long the chain of a record handled with ctx, started
// at start, may go on starting steps.
func (c *Coordinator) chainBudget(ctx context.Context, start time.Time) time.Duration {
	budget := c.cfg.ChainTime
	if b, ok := ctx.Value(batchKey{}).(*Batch); ok {
		budget /= time.Duration(b.Waiting + 1)
		if b.Visibility > 0 {
			half := b.Visibility / 2
			if !b.Received.IsZero() {
				half -= start.Sub(b.Received) // the carrier has been hidden that long
			}
			budget = min(budget, half)
		}
	}
	return budget
}

// chain goes on from st, which msg's step has just written: it runs the
// steps that chain, each naming carrier (the version of the message
// handled), then sends the outbox of the last version written. A failure
// of a chained step is that step's own: its message is sent (the outbox
// of the version before it) and msg is done.
func (c *Coordinator) chain(ctx context.Context, msg durable.Message, carrier uint64, st *saga.State, plan *saga.Plan, took time.Duration) (Outcome, error) {
	c.logHandled(ctx, msg, st, HandledStep, took)
	start := c.cfg.Clock.Now()
	budget := c.chainBudget(ctx, start)
	for n := 0; n < c.cfg.ChainSteps; n++ {
		next, cur, ok := c.chainable(ctx, msg, st, plan, start, budget)
		if !ok {
			break
		}
		if c.cfg.BeforeChained != nil {
			c.cfg.BeforeChained(st)
		}
		sctx, span := c.traceChained(ctx, next, st)
		st2, took, err := c.chained(sctx, carrier, next, st, plan, cur)
		if span != nil {
			out, end := HandledChained, st2
			if err != nil {
				out, end = "", st
			}
			span.span.End(SpanEnd{Outcome: string(out), Version: end.Version, Status: end.Status, Err: err, End: c.cfg.Clock.Now()})
		}
		if d, ok := err.(*limitDeferral); ok {
			return c.deferChained(ctx, next, st, d) // the chain stops before a call over its limit
		}
		if err != nil {
			c.chainStopped(ctx, next, st, plan, err)
			if err := c.send(ctx, []durable.Message{next}); err != nil {
				return "", fmt.Errorf("saga %s: chain stopped at version %d, its message not sent: %w", msg.SagaID, next.Version, err)
			}
			return HandledStep, nil
		}
		st = st2
		c.logHandled(ctx, next, st, HandledChained, took)
	}
	if err := c.publish(ctx, st, plan); err != nil {
		return "", err
	}
	return HandledStep, nil
}

// chainable returns the message of st's outbox and the cursor it runs,
// when that step may run now in msg's chain, started at start with the
// time budget given.
func (c *Coordinator) chainable(ctx context.Context, msg durable.Message, st *saga.State, plan *saga.Plan, start time.Time, budget time.Duration) (durable.Message, saga.Cursor, bool) {
	if len(st.Outbox) != 1 {
		return durable.Message{}, saga.Cursor{}, false
	}
	next := st.Outbox[0]
	if next.Kind != durable.KindStep || next.Delay != 0 || next.Queue != msg.Queue || next.Version != st.Version {
		return durable.Message{}, saga.Cursor{}, false
	}
	cur, ok := st.Pending()
	if !ok || !plan.Chains(cur) || cur.Compensating != (next.Queue == durable.QueueCompensate) {
		return durable.Message{}, saga.Cursor{}, false
	}
	id, timeout := plan.Awaits(cur)
	if id != next.Step || cur.Attempt != next.Attempt {
		return durable.Message{}, saga.Cursor{}, false
	}
	now := c.cfg.Clock.Now()
	if now.Sub(start) >= budget || st.DeadlinePassed(now) {
		return durable.Message{}, saga.Cursor{}, false
	}
	if _, paused := c.pausedBy(ctx, plan, cur, now); paused {
		return durable.Message{}, saga.Cursor{}, false // its message defers it
	}
	return next, cur, fitsInvocation(ctx, timeout)
}

// fitsInvocation reports whether a step with the given timeout (zero:
// none) may start in a chain under ctx's deadline: it gets as much time
// as a fresh invocation would give it.
func fitsInvocation(ctx context.Context, timeout time.Duration) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return true
	}
	left := time.Until(dl)
	if timeout > 0 {
		return left >= timeout+saga.StartReserve+saga.ResultReserve
	}
	// No timeout of its own: the step may use the whole invocation, so
	// it chains only while the invocation is as fresh as a new one.
	budget, ok := ctx.Value(budgetKey{}).(time.Duration)
	return ok && budget-left < handBackSlack
}

// chained runs one step of a chain: the step next names, from st. A panic
// is the step's failure, returned as an error.
func (c *Coordinator) chained(ctx context.Context, carrier uint64, next durable.Message, st *saga.State, plan *saga.Plan, cur saga.Cursor) (_ *saga.State, _ time.Duration, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s\n%s", errPanicked, PanicText(r), debug.Stack())
		}
	}()
	return c.runStep(ctx, next, st, plan, cur, carrier)
}

// traceChained opens the span of a chained step, as a message's own: a
// trace shows a span per step whether it had a message or not (its
// outcome says "chained"). Without a Tracer it returns ctx and nil.
func (c *Coordinator) traceChained(ctx context.Context, next durable.Message, st *saga.State) (context.Context, *messageSpan) {
	if c.cfg.Tracer == nil {
		return ctx, nil
	}
	ms := &messageSpan{msg: next, began: c.cfg.Clock.Now()}
	ctx = c.traceMessage(context.WithValue(ctx, messageSpanKey{}, ms), st)
	return ctx, ms
}

// chainStopped logs a chained step that failed: its own message goes on
// with it.
func (c *Coordinator) chainStopped(ctx context.Context, next durable.Message, st *saga.State, plan *saga.Plan, err error) {
	c.log.LogAttrs(ctx, slog.LevelWarn, "chained step not done; its message is sent, and the step goes on there",
		slog.String("saga_id", next.SagaID), slog.String("step", next.Step), slog.Int("attempt", next.Attempt),
		slog.Uint64("version", next.Version), slog.String("error", plan.Redactor(st).Error(err).Error()))
}
