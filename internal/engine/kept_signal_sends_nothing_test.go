package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Keeping a delivery is no transition: the stored outbox of the version
// is not sent again. A signal kept while an action is pending (or an
// early callback completion) that sent the action's message again at once
// would let a second worker take the copy and run the attempt beside the
// one running it. docs/PROTOCOL.md says of a keep "the messages in flight
// stay valid: nothing is re-sent"; the cancel's fallback copy is delayed
// by durable.MaxDelay precisely so that "no second worker runs the action
// beside the one running it now".
func TestAKeptSignalNeverRunsThePendingActionTwice(t *testing.T) {
	r := newRig(t, "../saga/testdata/valid/expense.yaml")
	ctx := context.Background()
	var files atomic.Int64
	r.reg.Register("expenses.file", func(ctx context.Context, c saga.Call) (any, error) {
		if files.Add(1) == 1 {
			// Another worker takes whatever message is queued now.
			ds, err := r.q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1})
			if err != nil {
				t.Error(err)
			}
			for _, d := range ds {
				engine.HandleDelivery(ctx, r.coord, r.q, d, nil)
			}
		}
		return map[string]any{"id": "claim-1"}, nil
	})
	r.start("e-1", map[string]any{"amount": 3})
	sent := r.queue.sent.Load()
	if d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "e-1", Name: "approved", Payload: map[string]any{"by": "ann"}, ID: "mail-1"}); err != nil || d.Receipt != saga.ReceiptKept {
		t.Fatalf("the signal: %+v %v", d, err)
	}
	if n := r.queue.sent.Load() - sent; n != 0 {
		t.Errorf("keeping the signal sent %d messages (the pending action's message again), want none", n)
	}
	r.drain()
	if st := r.get("e-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("saga %s %+v", st.Status, st.Failure)
	}
	if n := files.Load(); n != 1 {
		t.Fatalf("expenses.file ran %d times for one attempt, concurrently: the keep sent its message again", n)
	}
}
