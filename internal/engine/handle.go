package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// unstorable reports whether a write failed for a reason that will not
// change however often it is retried.
func unstorable(err error) bool {
	return errors.Is(err, durable.ErrTooLarge) || errors.Is(err, saga.ErrUnstorable)
}

// Outcome says what Handle did with a message.
type Outcome string

const (
	HandledStep    Outcome = "step"     // ran the pending action and wrote the next version
	HandledResent  Outcome = "resent"   // the transition had happened: re-sent its outbox
	HandledStale   Outcome = "stale"    // an old duplicate: dropped
	HandledNothing Outcome = "finished" // the saga waits for nothing: dropped
	HandledTimer   Outcome = "timer"    // fired the saga's timer and wrote the next version
	HandledEarly   Outcome = "early"    // the saga's timer is not due yet: sent again for the rest, no write
	HandledExpired Outcome = "expired"  // marked items of a finished tree to expire with its root
)

// Handle processes one message body, as docs/PROTOCOL.md describes. A nil
// error means the message is done and may be deleted. An error wrapping
// durable.ErrMalformedMessage means it can never be handled: report it
// failed so it reaches the dead-letter queue untouched. Any other error
// (ErrNoActions among them) means try again later: leave the message for
// redelivery.
func (c *Coordinator) Handle(ctx context.Context, body []byte) (Outcome, error) {
	if c.cfg.Actions == nil {
		return "", ErrNoActions
	}
	msg, err := durable.DecodeMessage(body)
	if err != nil {
		c.log.LogAttrs(ctx, slog.LevelError, "malformed message", slog.Int("bytes", len(body)), slog.String("error", err.Error()))
		return "", err
	}
	return c.HandleMessage(ctx, msg)
}

// HandleMessage is Handle for a message already decoded (an SQS record
// the handler decoded to log it): the body is not decoded again.
func (c *Coordinator) HandleMessage(ctx context.Context, msg durable.Message) (Outcome, error) {
	if c.cfg.Actions == nil {
		return "", ErrNoActions
	}
	handle := c.handle
	switch msg.Kind {
	case durable.KindEnded:
		handle = c.ended
	case durable.KindJoin:
		handle = c.join
	case durable.KindUndo:
		handle = c.undo
	case durable.KindStop:
		handle = c.stop
	case durable.KindExpire:
		handle = c.expire
	case durable.KindLaunch:
		// Done by whoever sends the outbox that holds it: never queued,
		// so one here was never ours.
		err := fmt.Errorf("%w: a %s message of saga %s is never queued", durable.ErrMalformedMessage, msg.Kind, msg.SagaID)
		c.log.LogAttrs(ctx, slog.LevelError, "malformed message", slog.String("error", err.Error()))
		return "", err
	}
	if msg.Kind != durable.KindStep {
		handle = c.masked(handle)
	}
	if c.cfg.Tracer != nil {
		return c.traced(ctx, msg, handle)
	}
	return c.retrying(ctx, msg, handle)
}

// masked passes the error of a fork's message (a child's end, a join, an
// undo, a stop) through the redactor of the saga it names, as the step
// handler passes its own: a store or a plan may quote the saga's values,
// and the error is logged. The saga is read again only when there is an
// error to mask; if that read fails, the error's text is withheld (its
// cause stays, for errors.Is).
func (c *Coordinator) masked(handle func(context.Context, durable.Message) (Outcome, error)) func(context.Context, durable.Message) (Outcome, error) {
	return func(ctx context.Context, msg durable.Message) (Outcome, error) {
		out, err := handle(ctx, msg)
		if err == nil || errors.Is(err, durable.ErrConflict) {
			return out, err // a conflict is retried, and names no value
		}
		_, st, plan, lerr := c.load(ctx, msg.SagaID)
		if lerr != nil {
			return out, &withheld{err: err, text: fmt.Sprintf("%s message of saga %s failed; its error is withheld, as saga %s could not be read to mask its secrets (%v)", msg.Kind, msg.SagaID, msg.SagaID, lerr)}
		}
		return out, plan.Redactor(st).Error(err)
	}
}

// withheld is an error whose text is not shown: it may quote values that
// could not be masked. Its cause is kept for errors.Is and errors.As.
type withheld struct {
	err  error
	text string
}

func (w *withheld) Error() string { return w.text }
func (w *withheld) Unwrap() error { return w.err }

// retrying runs handle until it does not lose a conditional write, at
// most MaxConflictRetries times.
func (c *Coordinator) retrying(ctx context.Context, msg durable.Message, handle func(context.Context, durable.Message) (Outcome, error)) (Outcome, error) {
	for range c.cfg.MaxConflictRetries {
		outcome, err := handle(ctx, msg)
		if errors.Is(err, durable.ErrConflict) {
			continue // another worker won: reload and look again
		}
		return outcome, err
	}
	return "", fmt.Errorf("saga %s: %w after %d tries", msg.SagaID, durable.ErrConflict, c.cfg.MaxConflictRetries)
}

func (c *Coordinator) handle(ctx context.Context, msg durable.Message) (outcome Outcome, err error) {
	_, st, plan, err := c.load(ctx, msg.SagaID)
	if err == nil {
		if red := plan.Redactor(st); red != nil {
			// An error may quote what an action or a service said: it is
			// logged, so it shows no secret input (its input never changes).
			defer func() { err = red.Error(err) }()
		}
		ctx = c.traceMessage(ctx, st)
	}
	if errors.Is(err, errSagaMissing) {
		// Sagas are written before their first message is sent: a message
		// for a saga that does not exist was never ours.
		return "", fmt.Errorf("%w: %w", durable.ErrMalformedMessage, err)
	}
	if err != nil {
		return "", err
	}
	carrier := msg.Version // the version every version this handling writes names
	switch {
	case st.Version > msg.Version+1 && st.Carrier == msg.Version && msg.Kind == durable.KindStep && st.FromOutside && waitedFor(plan, st, chainedAttempt(plan, st)):
		// msg carried a chain whose step a cancel landed on, and came
		// back: the cancel waits for that attempt, which had no message
		// of its own. It runs now, at the cancel's version.
		msg = chainedAttempt(plan, st)
	case st.Version > msg.Version+1 && st.Carrier == msg.Version && msg.Kind == durable.KindStep:
		// msg carried the chain that wrote this version, and came back:
		// the chain stopped before its last outbox was surely sent
		// (docs/PROTOCOL.md, "Chains").
		if err := c.resendOutbox(ctx, st, plan); err != nil {
			return "", fmt.Errorf("saga %s: re-send outbox of version %d, chained from version %d: %w", msg.SagaID, st.Version, msg.Version, err)
		}
		c.logHandled(ctx, msg, st, HandledCarrier, 0)
		return HandledCarrier, nil
	case st.Version > msg.Version+1:
		c.logHandled(ctx, msg, st, HandledStale, 0)
		return HandledStale, nil
	case st.Version == msg.Version+1 && waitedFor(plan, st, msg):
		// A cancel landed before this message was handled, and waits for
		// this very attempt's outcome: run it at the cancel's version.
	case st.Version == msg.Version+1 && st.FromOutside:
		// The transition came from outside (a signal that beat this
		// timer, a cancel): this message did not cause it, and its
		// outbox is the sender's to send (or the sweep's). Dropped.
		c.logHandled(ctx, msg, st, HandledStale, 0)
		return HandledStale, nil
	case st.Version == msg.Version+1:
		if err := c.resendOutbox(ctx, st, plan); err != nil {
			return "", fmt.Errorf("saga %s: re-send outbox of version %d: %w", msg.SagaID, st.Version, err)
		}
		c.logHandled(ctx, msg, st, HandledResent, 0)
		return HandledResent, nil
	case st.Version < msg.Version:
		// Consistent reads never lag a write: the store lost one (a restore
		// from a backup, say). The message cannot be handled: poison.
		return "", fmt.Errorf("%w: saga %s is at version %d, behind message version %d: did the store lose a write?", ErrDamagedState, msg.SagaID, st.Version, msg.Version)
	}
	cur, ok := st.Pending()
	if !ok {
		c.logHandled(ctx, msg, st, HandledNothing, 0)
		return HandledNothing, nil
	}
	if id, _ := plan.Awaits(cur); id != msg.Step || cur.Attempt != msg.Attempt || cur.Compensating != (msg.Queue == durable.QueueCompensate) {
		return "", fmt.Errorf("%w: message for %s %s attempt %d, but saga %s version %d waits on %s attempt %d",
			durable.ErrMalformedMessage, msg.Queue, msg.Step, msg.Attempt, msg.SagaID, st.Version, id, cur.Attempt)
	}
	if cur.Fork {
		// A parent waits on its fork's children: a message for it is its
		// deadline's timer (the tick's), or stale.
		if !cur.Compensating && !st.WakeAt().IsZero() {
			return c.fire(ctx, msg, st, plan)
		}
		c.logHandled(ctx, msg, st, HandledStale, 0)
		return HandledStale, nil
	}
	if cur.Held && st.WakeAt().IsZero() {
		// Held for an operator with no timer: nothing runs.
		c.logHandled(ctx, msg, st, HandledStale, 0)
		return HandledStale, nil
	}
	if cur.Wait || cur.Held || st.DeadlinePassed(c.cfg.Clock.Now()) {
		// A timer; or an action whose saga's deadline has passed: it does
		// not run, the deadline fires.
		return c.fire(ctx, msg, st, plan)
	}
	if p, ok := c.pausedBy(ctx, plan, cur, c.cfg.Clock.Now()); ok {
		return c.paused(ctx, msg, st, plan, cur, p, carrier)
	}
	return c.runAction(ctx, msg, st, plan, cur, carrier)
}

// runAction runs the attempt msg carries, the pending one of st, and
// commits its outcome: the action's result, error or timeout is the
// event of one transition, written; then the steps that follow it
// chain, and the last outbox is sent (chain.go). carrier is the version
// of the message handled: msg's own, or, when msg is the attempt a cancel
// waits for (chainedAttempt), the carrier's that came back to run it.
func (c *Coordinator) runAction(ctx context.Context, msg durable.Message, st *saga.State, plan *saga.Plan, cur saga.Cursor, carrier uint64) (Outcome, error) {
	if err := c.timeLeft(ctx, plan, cur, msg); err != nil {
		return "", err
	}
	next, took, err := c.runStep(ctx, msg, st, plan, cur, carrier)
	if d, ok := err.(*limitDeferral); ok {
		return c.deferCall(ctx, msg, st, d)
	}
	if err != nil {
		return "", err
	}
	return c.chain(ctx, msg, carrier, next, plan, took)
}

// runStep runs the attempt msg names, the pending one of st, and writes
// its outcome, naming carrier, the version of the message handled, as
// the version's carrier: the message's own step, or a step its chain runs
// after it (then msg is the message the chain did not send). It returns
// the state written, and how long the action took.
func (c *Coordinator) runStep(ctx context.Context, msg durable.Message, st *saga.State, plan *saga.Plan, cur saga.Cursor, carrier uint64) (*saga.State, time.Duration, error) {
	// Times in UTC with no monotonic reading, as the codec reads them
	// back: a chain goes on from the state it holds, which must be the
	// state a read would give.
	now := c.cfg.Clock.Now().UTC()
	var held lease // a concurrency slot the call takes (limit.go), released once its outcome is written
	out, took, actErr := c.invoke(ctx, plan, st, now, &held)
	if held.refused != nil {
		if actErr = deferredPastDeadline(st, cur, now, held.refused); actErr == nil {
			return nil, 0, held.refused
		}
	}
	ev := saga.Event{Kind: saga.EventResult, Now: c.cfg.Clock.Now().UTC(), Rand: c.cfg.Rand(), Output: out, Err: actErr, Took: took, Carrier: carrier, OffloadBytes: c.offloadBytes()}
	var h *heard // only when someone listens: no allocation otherwise
	if c.cfg.OnStep != nil {
		h = &heard{}
	}
	s := subject{sagaID: msg.SagaID, step: msg.Step, plan: plan}
	t := transition{
		advance: func(st *saga.State, limit int) error {
			ev.StoreLimit = limit
			if h != nil {
				ev.OnStep = c.observer(plan, h, msg.SagaID, st, &stepTiming{step: msg.Step, comp: cur.Compensating && !cur.Unknown, took: took})
			}
			return plan.Advance(st, ev)
		},
		// A cancel may have landed while the action ran, or a signal or
		// callback's completion been kept: both keep the pending attempt,
		// so this outcome still applies, to the saga as it is now
		// (otherwise the action would run again, and a service that
		// answers a repeated key differently could lose the effect).
		onConflict: func(ctx context.Context, base uint64) (*saga.State, uint64, bool) {
			st, ok := c.keptDuring(ctx, msg, cur, base)
			if !ok {
				return nil, 0, false
			}
			return st, st.Version, true
		},
		reread: func(ctx context.Context, base uint64) (*saga.State, uint64, error) {
			_, st, _, err := c.load(ctx, msg.SagaID)
			if err != nil {
				return nil, 0, err
			}
			if st.Version != base && base == msg.Version {
				// A cancel that landed while the action ran keeps its
				// attempt pending: the outcome applies to its version.
				if st2, ok := c.keptDuring(ctx, msg, cur, base); ok {
					st, base = st2, st2.Version
				}
			}
			if st.Version != base {
				return nil, 0, fmt.Errorf("saga %s: %w", msg.SagaID, durable.ErrConflict)
			}
			return st, base, nil
		},
	}
	st, err := c.commit(ctx, &s, &t, h, st, st.Version)
	c.release(ctx, &held)
	return st, took, err
}

// fire handles the message of a waiting saga's timer: once it is due, one
// transition (EventTimer) written and sent like any other; before, the
// message goes out again for the time left, and nothing is written.
func (c *Coordinator) fire(ctx context.Context, msg durable.Message, st *saga.State, plan *saga.Plan) (Outcome, error) {
	now := c.cfg.Clock.Now()
	if wake := st.WakeAt(); now.Before(wake) {
		again := durable.Message{SagaID: st.SagaID, Version: st.Version, Queue: durable.QueueAdvance, Step: msg.Step, Attempt: msg.Attempt, Delay: min(wake.Sub(now), durable.MaxDelay)}
		if err := c.send(ctx, []durable.Message{again}); err != nil {
			return "", fmt.Errorf("saga %s: timer not due, sending it again: %w", st.SagaID, err)
		}
		c.logHandled(ctx, msg, st, HandledEarly, 0)
		return HandledEarly, nil
	}
	return c.commitEvent(ctx, msg, st, plan, saga.Event{Kind: saga.EventTimer, Now: now}, HandledTimer)
}

// commitEvent writes ev, an event the message msg brings about without
// running an action (a timer; a paused attempt a cancel or the deadline
// settles), as one transition, observers told, and sends its outbox.
func (c *Coordinator) commitEvent(ctx context.Context, msg durable.Message, st *saga.State, plan *saga.Plan, ev saga.Event, out Outcome) (Outcome, error) {
	var h *heard // only when someone listens: no allocation otherwise
	if c.cfg.OnStep != nil {
		h = &heard{}
	}
	s := subject{sagaID: msg.SagaID, step: msg.Step, plan: plan}
	t := transition{
		advance: func(st *saga.State, limit int) error {
			ev.Rand, ev.StoreLimit, ev.OffloadBytes = c.cfg.Rand(), limit, c.offloadBytes()
			if h != nil {
				ev.OnStep = c.observer(plan, h, msg.SagaID, st, nil)
			}
			return plan.Advance(st, ev)
		},
	}
	st, err := c.commit(ctx, &s, &t, h, st, st.Version)
	if err != nil {
		return "", err
	}
	if err := c.publish(ctx, st, plan); err != nil {
		return "", err
	}
	c.logHandled(ctx, msg, st, out, 0)
	return out, nil
}

// chainedAttempt is the message a chain would have sent for the attempt
// pending in st, a cancel request written on the chain's last version.
func chainedAttempt(plan *saga.Plan, st *saga.State) durable.Message {
	cur, ok := st.Pending()
	if !ok {
		return durable.Message{}
	}
	id, _ := plan.Awaits(cur)
	return durable.Message{SagaID: st.SagaID, Version: st.Version - 1, Queue: durable.QueueAdvance, Step: id, Attempt: cur.Attempt}
}

// waitedFor reports whether st is a cancel request (written after msg's
// version) that keeps msg's attempt pending: msg then runs it.
func waitedFor(plan *saga.Plan, st *saga.State, msg durable.Message) bool {
	cur, ok := st.Pending()
	if !ok || !st.CancelRequested || cur.Compensating || msg.Queue != durable.QueueAdvance || cur.Attempt != msg.Attempt {
		return false
	}
	id, _ := plan.Awaits(cur)
	return id == msg.Step
}

// keptDuring reloads a saga whose write (at version base) just lost, and
// returns it if the writes that won keep the very attempt msg ran pending:
// a keep of a delivery (the same version), or a cancel request (the
// version after msg's).
func (c *Coordinator) keptDuring(ctx context.Context, msg durable.Message, cur saga.Cursor, base uint64) (*saga.State, bool) {
	_, st, _, err := c.load(ctx, msg.SagaID)
	if err != nil || !(st.Version == base || st.CancelRequested && st.Version == msg.Version+1) {
		return nil, false
	}
	now, ok := st.Pending()
	return st, ok && now == cur
}

// errSagaMissing marks a load that found no saga (as opposed to no definition).
var errSagaMissing = errors.New("no such saga")

// mayBeWritten reports whether a write that returned err may have landed.
func mayBeWritten(err error) bool {
	return err == nil || !(errors.Is(err, durable.ErrConflict) || errors.Is(err, durable.ErrExists) || errors.Is(err, durable.ErrThrottled) || unstorable(err))
}

// invoke runs the pending action with its step timeout. Its error is the
// step's: an expression error building the input is permanent. A call
// its action's limit does not admit does not run: held.refused says why.
func (c *Coordinator) invoke(ctx context.Context, plan *saga.Plan, st *saga.State, now time.Time, held *lease) (_ any, _ time.Duration, err error) {
	call, err := plan.CallWithin(st, now, c.offloadBytes())
	if err != nil {
		return nil, 0, saga.Permanent(err)
	}
	if held.refused = c.admit(ctx, &call, now, held); held.refused != nil {
		return nil, 0, nil
	}
	actx, cancel, cutByInvocation := actionContext(ctx, call.Timeout)
	defer cancel()
	if c.cfg.Tracer != nil {
		var span Span
		actx, span = c.traceCall(actx, st, &call)
		// The span goes to the traces an operator reads: its error shows
		// no secret input, as the logs' do.
		defer func() {
			spanErr := err
			if spanErr != nil {
				spanErr = plan.Redactor(st).Error(spanErr)
			}
			c.endCall(span, st, spanErr)
		}()
	}
	start := c.cfg.Clock.Now()
	out, err := c.safeInvoke(actx, call)
	took := c.cfg.Clock.Now().Sub(start)
	if err != nil {
		if actx.Err() != nil && !saga.IsPermanent(err) {
			msg := fmt.Sprintf("action %s did not finish within %s", call.Action, call.Timeout)
			if cutByInvocation {
				msg = fmt.Sprintf("action %s was stopped %s before the invocation's deadline, to record its outcome", call.Action, saga.ResultReserve)
			}
			err = &saga.ActionError{Type: lang.ErrorTypeTimeout, Message: msg}
		}
		return nil, took, err
	}
	norm, err := saga.ActionOutput(call.Action, out)
	return norm, took, err
}

// safeInvoke turns a panicking action into a retryable error.
func (c *Coordinator) safeInvoke(ctx context.Context, call saga.Call) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("action %s panicked: %s", call.Action, PanicText(r))
		}
	}()
	return c.cfg.Actions.Invoke(ctx, call)
}

// stateBuffers recycles encoding buffers: a store copies what it writes.
var stateBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// write stores st conditionally on the expected version. The step events
// held in h are reported once the store has written it, or answered in a
// way that leaves that unknown (a timeout, a crash): never for a
// transition that lost its condition, was throttled, or was replayed
// because it could not be stored.
func (c *Coordinator) write(ctx context.Context, st *saga.State, expected uint64, h *heard) error {
	bp := stateBuffers.Get().(*[]byte)
	rec, err := c.record(ctx, st, (*bp)[:0])
	if err == nil {
		c.writing(st.SagaID)
		err = c.cfg.Store.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: rec, ExpectedVersion: expected, ExpectedReceived: st.Received})
		if mayBeWritten(err) {
			h.report()
		}
		c.heardAll(st.SagaID)
		if cap(rec.State) <= 1<<20 {
			*bp = rec.State[:0]
		}
	}
	stateBuffers.Put(bp)
	return err
}

func (c *Coordinator) logHandled(ctx context.Context, msg durable.Message, st *saga.State, outcome Outcome, took time.Duration) {
	c.noteHandled(ctx, st)
	if !c.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "message handled",
		slog.String("saga_id", msg.SagaID), slog.String("step", msg.Step), slog.Int("attempt", msg.Attempt),
		slog.Uint64("version", st.Version), slog.String("outcome", string(outcome)),
		slog.String("status", string(st.Status)), slog.Duration("duration", took))
}
