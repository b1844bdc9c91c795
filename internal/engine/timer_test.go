package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A wait within a queue's delay is its own message; the tick, which
// lists every timer due within its Ahead, sends it a second copy in its
// last minute. The copies "are dropped by version once the first has
// fired it" (Tick's doc): the copy arrives with the original, finds the
// saga one version on, and is dropped rather than re-sending that
// version's outbox. Otherwise the next step's message goes out twice, and
// every short wait that meets a tick duplicates the rest of the saga's
// messages: with the embedded runtime's one-second tick, sixty times.
func TestATickCopyOfATimerIsDroppedNotResent(t *testing.T) {
	t.Parallel()
	def := filepath.Join(t.TempDir(), "short.yaml")
	src := "saga: short\nsteps:\n  - {id: reserve, action: inventory.reserve}\n  - {id: settle, wait: {for: 10m}}\n  - {id: ship, action: shipping.send}\n"
	if err := os.WriteFile(def, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, def)
	ctx := context.Background()
	r.start("s-1", nil)
	d, ok := r.receive() // reserve's message
	if !ok {
		t.Fatal("no message for reserve")
	}
	engine.HandleDelivery(ctx, r.coord, r.q, d, nil)
	st := r.get("s-1")
	if st.Status != durable.StatusWaiting || r.q.Len(durable.QueueAdvance) != 1 {
		t.Fatalf("after reserve: %s with %d queued; want waiting on its own timer message", st.Status, r.q.Len(durable.QueueAdvance))
	}
	// The scheduled tick, in the wait's last minute.
	r.clock.Advance(st.WakeAt().Add(-30 * time.Second).Sub(r.clock.Now()))
	if _, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil {
		t.Fatal(err)
	}
	sentBefore := r.queue.sent.Load()
	r.drain()
	if got := r.get("s-1"); got.Status != durable.StatusSucceeded {
		t.Fatalf("ended %s", got.Status)
	}
	// After the tick: the timer fires (ship's message). A copy of the
	// timer, dropped, sends nothing.
	if n := r.queue.sent.Load() - sentBefore; n != 1 {
		t.Fatalf("%d messages sent after the tick, want 1 (ship's): the tick's copy of the timer re-sent the next version's outbox", n)
	}
}

// staleDue is a store whose due-timer listing lags, as store/dynamo's
// by_due index does (a GSI is eventually consistent), or as any listing
// does when the saga moves between the list and the read: it lists one
// saga as due at a time that has passed.
type staleDue struct {
	durable.Store
	sagaID string
	wakeAt time.Time
}

func (s staleDue) SagaListDue(context.Context, *durable.SagaListDueParams) (*durable.SagaListDueResult, error) {
	return &durable.SagaListDueResult{Sagas: []durable.SagaDue{{SagaID: s.sagaID, WakeAt: s.wakeAt}}}, nil
}

// A saga listed as due whose timer, read again, is days away (it fired
// and the saga moved on to a longer wait, or the index lags) is skipped
// by the tick, or sent at most a queue's delay ahead. Sent with the full
// time left as the delay, which no queue takes (SQS at most 15 minutes),
// the tick would fail, and on AWS the scheduled function would report an
// error every time an index entry lags.
func TestATickOfASagaWhoseTimerMovedAwayDoesNotFail(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/cooling.yaml")
	ctx := context.Background()
	r.start("c-1", nil)
	r.drain() // reserve runs; the saga waits 36 hours
	st := r.get("c-1")
	if st.Status != durable.StatusWaiting {
		t.Fatalf("after reserve: %s", st.Status)
	}
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{
		Store: staleDue{Store: r.store, sagaID: "c-1", wakeAt: r.clock.Now().Add(-time.Minute)}, Queue: r.queue, Actions: r.reg, Clock: r.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := coord.Tick(ctx, &engine.TickParams{})
	if err != nil {
		t.Fatalf("tick of a saga whose timer is %s away: %+v, %v", st.WakeAt().Sub(r.clock.Now()), res, err)
	}
}

// The timer message of an await (or of a callback's wait) that a delivery
// completed is a message of the version before the delivery's transition.
// When it comes due while the saga still is at that next version, it
// "finds the next version and is dropped" (receive_test.go): Handle must
// not take it for the message whose transition was written and not sent
// (rule 3), or it would send that version's messages again, a second copy
// of the next timer or of the next action's message, in the ordinary run
// of things with nothing lost to recover.
func TestATimerOutrunByItsDeliveryIsDropped(t *testing.T) {
	t.Parallel()
	t.Run("await", func(t *testing.T) {
		r := newTextRig(t, `saga: aw
steps:
  - id: first
    action: a.first
  - id: approval
    await: {signal: ok, timeout: 10m}
  - id: cool
    wait: {for: 14m}
  - id: last
    action: a.last
`)
		ctx := context.Background()
		r.start("aw-1", nil)
		d, ok := r.receive()
		if !ok {
			t.Fatal("no first message")
		}
		engine.HandleDelivery(ctx, r.coord, r.q, d, nil) // first runs; the await parks on a 10-minute timer message
		r.clock.Advance(time.Minute)
		if got, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "aw-1", Name: "ok", ID: "ok-1"}); err != nil || got.Receipt != saga.ReceiptApplied {
			t.Fatalf("signal: %+v %v", got, err)
		}
		// The saga waits 14 minutes at cool: one timer message is due then.
		r.clock.Advance(9*time.Minute + time.Second)
		ds, err := r.q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10})
		if err != nil || len(ds) != 1 {
			t.Fatalf("the await's timer message: %d %v", len(ds), err)
		}
		sent := r.queue.sent.Load()
		out, err := r.coord.Handle(ctx, ds[0].Body)
		if err != nil {
			t.Fatal(err)
		}
		if out != engine.HandledStale || r.queue.sent.Load() != sent {
			t.Fatalf("the await's timer, after the signal completed the await: %s, %d messages sent (want %s, none): cool's timer goes out twice",
				out, r.queue.sent.Load()-sent, engine.HandledStale)
		}
	})
	t.Run("callback", func(t *testing.T) {
		r := newTextRig(t, `saga: cb
steps:
  - id: charge
    action: p.charge
    callback: {timeout: 10m}
    out: payment
    compensate: {action: p.refund}
  - id: ship
    action: p.ship
`)
		ctx := context.Background()
		var token string
		r.reg.Register("p.charge", func(ctx context.Context, c saga.Call) (any, error) { token = c.CallbackToken; return "pending", nil })
		r.start("cb-1", nil)
		d, _ := r.receive()
		engine.HandleDelivery(ctx, r.coord, r.q, d, nil) // charge runs; the saga waits on its token
		r.clock.Advance(10*time.Minute + time.Second)
		ds, err := r.q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10})
		if err != nil || len(ds) != 1 {
			t.Fatalf("the callback's timer message: %d %v", len(ds), err)
		}
		// The completion lands just before the timer's write: it wins, and
		// sends ship's message.
		var won *engine.Delivered
		r.store.beforeUpdate = func(*durable.SagaUpdateParams) {
			won, err = r.coord.CompleteCallback(ctx, token, "paid")
		}
		sent := r.queue.sent.Load()
		out, herr := r.coord.Handle(ctx, ds[0].Body)
		if err != nil || won == nil || won.Receipt != saga.ReceiptApplied || herr != nil {
			t.Fatalf("completion %+v %v; timer %v", won, err, herr)
		}
		if n := r.queue.sent.Load() - sent; out != engine.HandledStale || n != 1 {
			t.Fatalf("the timer that lost to the completion: %s, %d messages sent in all (want %s, 1: ship's): ship's message goes out twice",
				out, n, engine.HandledStale)
		}
	})
}
