package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A repeated signal (a webhook retried) while the saga's next action runs
// does not run that action again: a copy of its message visible at once
// would run the same attempt beside the one running it, and a sender's
// retry would make an action run twice. (A repeated cancel's copy of a
// running action's message is delayed by durable.MaxDelay for the same
// reason.)
func TestARepeatedSignalDoesNotRunThePendingActionAgain(t *testing.T) {
	r := newRig(t, "../saga/testdata/valid/expense.yaml")
	ctx := context.Background()
	var pays atomic.Int64
	r.reg.Register("payments.pay", func(ctx context.Context, c saga.Call) (any, error) {
		if pays.Add(1) == 1 {
			// While pay runs, the approval's sender retries its signal.
			if d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: c.SagaID, Name: "approved", Payload: map[string]any{"by": "ann"}, ID: "mail-1"}); err != nil || d.Receipt != saga.ReceiptDuplicate {
				t.Errorf("the repeat: %+v %v", d, err)
			}
			// Another worker takes whatever message is queued now.
			ds, err := r.q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1})
			if err != nil {
				t.Error(err)
			}
			for _, d := range ds {
				engine.HandleDelivery(ctx, r.coord, r.q, d, nil)
			}
		}
		return map[string]any{"id": "pay-1"}, nil
	})
	r.start("e-1", map[string]any{"amount": 3})
	r.drain() // file runs; the saga awaits the approval (72h: no timer message)
	if d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "e-1", Name: "approved", Payload: map[string]any{"by": "ann"}, ID: "mail-1"}); err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("the signal: %+v %v", d, err)
	}
	r.drain()
	if st := r.get("e-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("saga %s %+v", st.Status, st.Failure)
	}
	if n := pays.Load(); n != 1 {
		t.Fatalf("payments.pay ran %d times for one attempt, concurrently: the repeated signal re-sent its message while it ran", n)
	}
}
