package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// The simulated senders of signals and callback completions. They go
// through engine.Coordinator.Signal, CompleteCallback and FailCallback, as
// a real sender does, over the same faulty store: early (while the action
// before the await runs, or before the saga reaches it), in time, racing
// the await's timer and a cancel, late, twice with one id; callbacks
// completed twice, from inside the action, after the step timed out,
// failed and then completed, and with an earlier attempt's token.

// sentSignal is one logical signal: its id is the payload's "sig", the
// same in every send of it (the delivery id too, unless sabotaged).
type sentSignal struct {
	saga, name string
	receipts   map[string]int // receipt or error class -> sends that got it
}

// receives reports whether a plan takes signals or callbacks, or has a
// deadline: the commits of its sagas are decoded for the checks.
func receives(p *saga.Plan) bool {
	if p.Definition().Timeout > 0 {
		return true
	}
	for _, s := range p.Definition().Steps {
		if s.Kind == lang.KindAwait || s.Callback != nil {
			return true
		}
	}
	return false
}

// awaited lists the signal names a plan awaits.
func awaited(p *saga.Plan) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range p.Definition().Steps {
		if s.Kind == lang.KindAwait && !seen[s.Await.Signal] {
			seen[s.Await.Signal] = true
			out = append(out, s.Await.Signal)
		}
	}
	return out
}

// summary is what the checks need of a committed state.
type summary struct {
	kept     []keptSignal // signals kept, in order
	pending  saga.Cursor
	has      bool // pending is set
	deadline time.Time
	token    string // the pending callback attempt's token, if any
	// cancel: a cancel waits on the pending action (the deadline does
	// not fire then: saga.State.DeadlinePassed).
	cancel bool
	// forkStopped: the deadline fired while the saga waited on a fork,
	// and stopped it. The saga waits on until the children have ended, as
	// after a cancel, then compensates (docs/STATES.md).
	forkStopped bool
}

type keptSignal struct{ id, name string }

func (w *world) summarize(rec *durable.SagaRecord, plan *saga.Plan) *summary {
	st := &saga.State{}
	if err := st.UnmarshalBinary(rec.State); err != nil {
		return nil
	}
	sm := &summary{deadline: st.Deadline, cancel: st.CancelRequested}
	sm.pending, sm.has = st.Pending()
	sm.forkStopped = sm.has && sm.pending.Fork && !sm.pending.Compensating &&
		st.Failure != nil && st.Failure.Type == lang.ErrorTypeDeadline
	for _, d := range st.Kept {
		if d.Signal == "" {
			continue
		}
		id, _ := payloadID(d.Payload, "sig")
		sm.kept = append(sm.kept, keptSignal{id: id, name: d.Signal})
	}
	sm.token = plan.CallbackToken(st)
	return sm
}

func payloadID(v any, field string) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	s, ok := m[field].(string)
	return s, ok
}

// scheduleDeliveries runs at each committed transition of a saga that
// takes signals or callbacks: when it waits on an await, signals are sent
// in time, at its timer, late or not at all, sometimes twice, sometimes
// with a cancel at the same moment; when it waits on a callback, its token
// is completed, failed, both, twice, late or never, and an earlier token
// is sometimes sent too.
func (w *world) scheduleDeliveries(id string, plan *saga.Plan, sm *summary, wakeAt time.Time) {
	if !sm.has || !sm.pending.Wait || sm.pending.Compensating {
		return
	}
	now := w.clock.Now()
	window := wakeAt.Sub(now)
	if window <= 0 {
		return
	}
	within := func() time.Time { return now.Add(time.Duration(w.rng.Int64N(int64(window)))) }
	late := func() time.Time { return wakeAt.Add(time.Second + time.Duration(w.rng.Int64N(int64(time.Hour)))) }
	step := plan.Steps()[sm.pending.Step]
	switch {
	case step.Kind == lang.KindAwait:
		sig := w.newSignalID(id)
		var at time.Time
		switch r := w.rng.Float64(); {
		case r < 0.5:
			at = within()
			w.report.Faults["signal_in_time"]++
		case r < 0.62:
			at = wakeAt // the await's timer fires at the same moment: either wins
			w.report.Faults["signal_racing_timeout"]++
		case r < 0.74:
			at = late()
			w.report.Faults["signal_late"]++
		default:
			return // the await times out
		}
		w.queue.addOp(at, func(ctx context.Context) { w.sendSignal(ctx, id, step.Await.Signal, sig) })
		if w.rng.IntN(6) == 0 {
			w.report.Faults["signal_duplicated"]++
			w.queue.addOp(at.Add(time.Duration(w.rng.Int64N(int64(10*time.Minute)))), func(ctx context.Context) { w.sendSignal(ctx, id, step.Await.Signal, sig) })
		}
		if w.rng.IntN(20) == 0 {
			w.report.Faults["signal_racing_cancel"]++
			w.queue.addOp(at, func(ctx context.Context) {
				w.actions.scripts[id].cancels = append(w.actions.scripts[id].cancels, "racing a signal")
				w.cancel(ctx, id)
			})
		}
	case step.Callback != nil && sm.token != "":
		tok := sm.token
		complete := func(at time.Time) {
			w.queue.addOp(at, func(ctx context.Context) { w.completeCallback(ctx, id, tok, false) })
		}
		fail := func(at time.Time) {
			w.queue.addOp(at, func(ctx context.Context) { w.completeCallback(ctx, id, tok, true) })
		}
		switch r := w.rng.Float64(); {
		case r < 0.45:
			complete(within())
			w.report.Faults["callback_in_time"]++
		case r < 0.55:
			fail(within())
			w.report.Faults["callback_failed"]++
		case r < 0.63:
			t := within()
			fail(t)
			complete(t.Add(time.Duration(1+w.rng.IntN(60)) * time.Second))
			w.report.Faults["callback_failed_then_completed"]++
		case r < 0.73:
			t := within()
			complete(t)
			complete(t.Add(time.Duration(w.rng.IntN(60)) * time.Second))
			w.report.Faults["callback_completed_twice"]++
		case r < 0.8:
			complete(wakeAt)
			w.report.Faults["callback_racing_timeout"]++
		case r < 0.87:
			complete(late())
			w.report.Faults["callback_after_timeout"]++
		}
		if old := w.tokens[id]; len(old) > 1 && w.rng.IntN(4) == 0 {
			stale := old[w.rng.IntN(len(old)-1)]
			if stale != tok {
				w.report.Faults["callback_stale_token"]++
				w.queue.addOp(within(), func(ctx context.Context) { w.completeCallback(ctx, id, stale, false) })
			}
		}
	}
}

// earlySignals sends, at a saga's start, signals before any await waits
// on them: a third of the sagas that await a signal get one in their
// first minutes, and some get one of a name they never await (kept to
// the end).
func (w *world) earlySignals(s *sagaSpec) {
	names := awaited(s.plan)
	if len(names) == 0 {
		return
	}
	if w.rng.IntN(3) == 0 {
		name, sig := names[w.rng.IntN(len(names))], w.newSignalID(s.id)
		w.report.Faults["signal_early"]++
		w.queue.addOp(w.clock.Now().Add(time.Duration(w.rng.Int64N(int64(2*time.Minute)))), func(ctx context.Context) { w.sendSignal(ctx, s.id, name, sig) })
	}
	if len(names) < len(GenSignals) && w.rng.IntN(10) == 0 {
		name := GenSignals[0]
		if name == names[0] {
			name = GenSignals[1]
		}
		sig := w.newSignalID(s.id)
		w.report.Faults["signal_never_awaited"]++
		w.queue.addOp(w.clock.Now().Add(time.Duration(w.rng.Int64N(int64(time.Minute)))), func(ctx context.Context) { w.sendSignal(ctx, s.id, name, sig) })
	}
}

// duringAction is called as an action runs: it may send a signal the saga
// awaits (kept until its await takes it) or complete the action's own
// callback token before the action returns (kept until it does).
func (w *world) duringAction(ctx context.Context, call saga.Call, sc *script) {
	if call.Compensation {
		return
	}
	if call.CallbackToken != "" {
		w.tokens[call.SagaID] = append(w.tokens[call.SagaID], call.CallbackToken)
		if w.rng.IntN(8) == 0 {
			w.report.Faults["callback_completed_during_action"]++
			w.completeCallback(ctx, call.SagaID, call.CallbackToken, false)
		}
	}
	if names := awaited(sc.spec.plan); len(names) > 0 && w.rng.IntN(12) == 0 {
		w.report.Faults["signal_during_action"]++
		w.sendSignal(ctx, call.SagaID, names[w.rng.IntN(len(names))], w.newSignalID(call.SagaID))
	}
}

func (w *world) newSignalID(sagaID string) string {
	w.nextSignal++
	id := fmt.Sprintf("sig-%d", w.nextSignal)
	w.signals[id] = &sentSignal{saga: sagaID, receipts: map[string]int{}}
	return id
}

// sendSignal sends one logical signal, retrying a send that failed for a
// reason that may pass (a crash, throttling, a conflict) with the same id,
// as a sender does. Under the sabotage "new-id-per-send" every send gets
// a new delivery id, so the saga cannot tell a repeat.
func (w *world) sendSignal(ctx context.Context, sagaID, name, sig string) {
	s := w.signals[sig]
	s.name = name
	w.deliver(ctx, sig, func(ctx context.Context) (*engine.Delivered, error) {
		id := sig
		if w.cfg.Sabotage == "new-id-per-send" {
			w.nextSignal++
			id = fmt.Sprintf("%s.%d", sig, w.nextSignal)
		}
		return w.coord.Signal(ctx, &engine.SignalParams{SagaID: sagaID, Name: name, ID: id, Payload: map[string]any{"sig": sig}})
	}, s.receipts)
}

// completeCallback completes (or fails) a callback token, retrying as
// sendSignal does.
func (w *world) completeCallback(ctx context.Context, sagaID, token string, fail bool) {
	if w.callbackReceipts[token] == nil {
		w.callbackReceipts[token] = map[string]int{}
	}
	w.deliver(ctx, token, func(ctx context.Context) (*engine.Delivered, error) {
		if fail {
			return w.coord.FailCallback(ctx, token, "Declined", "the service declined the work")
		}
		return w.coord.CompleteCallback(ctx, token, map[string]any{"cb": sagaID, "done": true})
	}, w.callbackReceipts[token])
}

// deliver runs send until it succeeds or is refused for good; each try
// is a handle of its own (its writes are tagged with what it delivers).
// A try may race a copy of itself (the fault racing_delivery, in the
// store's write).
func (w *world) deliver(ctx context.Context, tag string, send func(context.Context) (*engine.Delivered, error), receipts map[string]int) {
	prevDelivery, prevSending := w.delivery, w.sending
	w.delivery = nil
	w.delivering++
	defer func() { w.delivery, w.sending = prevDelivery, prevSending; w.delivering-- }()
	for try := 0; try < 20; try++ {
		w.bufs = append(w.bufs, &handleLog{delivery: tag})
		again := func(ctx context.Context) {
			w.sending = nil // the racing copy does not race again
			w.bufs = append(w.bufs, &handleLog{delivery: tag})
			d, err := send(ctx)
			w.bufs = w.bufs[:len(w.bufs)-1]
			receipts[receiptClass(d, err)]++
		}
		w.sending = again
		d, err := send(ctx)
		w.sending = nil
		w.bufs = w.bufs[:len(w.bufs)-1]
		class := receiptClass(d, err)
		receipts[class]++
		if class != "retry" {
			return
		}
	}
}

func receiptClass(d *engine.Delivered, err error) string {
	switch {
	case err == nil:
		return string(d.Receipt)
	case errors.Is(err, saga.ErrNotReceiving):
		return "not_receiving"
	case errors.Is(err, saga.ErrKeptFull):
		return "kept_full"
	case errors.Is(err, saga.ErrTokenNotAwaited):
		return "not_awaited"
	case errors.Is(err, saga.ErrBadToken), errors.Is(err, saga.ErrBadDelivery):
		return "bad"
	case errors.Is(err, durable.ErrNotFound):
		return "no_saga"
	}
	return "retry"
}
