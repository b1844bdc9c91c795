package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// The timer message of an await (or of a callback's wait) that a delivery
// completed is a message of the version before the delivery's transition.
// When it comes due while the saga still is at that next version, it
// "finds the next version and is dropped" (receive_test.go): Handle must
// not take it for the message whose transition was written and not sent
// (rule 3), or it would send that version's messages again, a second copy
// of the next timer or of the next action's message, in the ordinary run
// of things with nothing lost to recover.
func TestATimerOutrunByItsDeliveryIsDropped(t *testing.T) {
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
