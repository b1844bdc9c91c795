package engine_test

import (
	"context"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A foreach whose every iteration awaits an approval, one at a time: each
// approval sent to the saga reaches an iteration that has yet to take
// one. Sent before the fork, or while iteration 0 runs past its await.
func TestSignalsReachEachIterationThatAwaitsOne(t *testing.T) {
	const src = `
saga: batch
input: {items: list}
steps:
  - id: prepare
    action: svc.prepare
  - id: each
    foreach: "${input.items}"
    concurrency: 1
    steps:
      - {id: wait, await: {signal: approved, timeout: 1h}, out: decision}
      - {id: ship, action: svc.ship}
`
	in := map[string]any{"items": []any{"a", "b"}}
	t.Run("both sent before the fork", func(t *testing.T) {
		r := newFrig(t, src, nil)
		r.start("b-1", in)
		for range 2 {
			if d, err := signalTo(r, "b-1", "approved"); err != nil {
				t.Fatalf("signal: %+v %v", d, err)
			}
		}
		r.drain()
		it0, it1 := durable.ChildID("b-1", "each", 2, 0), durable.ChildID("b-1", "each", 2, 1)
		st := r.get("b-1")
		t.Logf("saga %s; iteration 0 keeps %d, iteration 1 %s keeps %d", st.Status, len(r.get(it0).Kept), r.get(it1).Status, len(r.get(it1).Kept))
		if st.Status != durable.StatusSucceeded {
			t.Fatalf("the saga is %s (%v): both approvals were handed to iteration 0, iteration 1 never gets one", st.Status, st.Failure)
		}
	})
	t.Run("the second sent while iteration 0 runs past its await", func(t *testing.T) {
		r := newFrig(t, src, nil)
		r.start("b-2", in)
		if _, err := signalTo(r, "b-2", "approved"); err != nil {
			t.Fatal(err)
		}
		it0 := durable.ChildID("b-2", "each", 2, 0)
		if !r.drainUntil(func() bool {
			st, err := r.coord.Get(context.Background(), it0)
			return err == nil && st.Status == durable.StatusRunning && st.Vars["decision"] != nil
		}) {
			t.Fatal("iteration 0 never passed its await")
		}
		d, err := signalTo(r, "b-2", "approved")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("second approval: %s by %s", d.Receipt, d.State.SagaID)
		r.drain()
		if st := r.get("b-2"); st.Status != durable.StatusSucceeded {
			t.Fatalf("the saga is %s (%v): the second approval went to %s, which had passed its await", st.Status, st.Failure, d.State.SagaID)
		}
	})
}

// A saga that awaits an approval itself, then runs a child saga that
// awaits one too: once the saga has passed its own await, an approval
// sent to it reaches the child, not a run that can never take it.
func TestSignalAfterTheSagasOwnAwaitReachesTheChild(t *testing.T) {
	r := newFrig(t, `
saga: order
steps:
  - id: first
    await: {signal: approved, timeout: 1h}
  - id: approve
    saga: approval.yaml
`, map[string]string{"approval.yaml": approvalChild})
	r.start("o-1", nil)
	r.drain()
	if d, err := signalTo(r, "o-1", "approved"); err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("first approval: %+v %v", d, err)
	}
	var child string
	if !r.drainUntil(func() bool {
		if child = childOf(r, "o-1"); child == "" {
			return false
		}
		st, err := r.coord.Get(context.Background(), child)
		return err == nil && st.Status == durable.StatusRunning
	}) {
		t.Fatal("the child never started")
	}
	d, err := signalTo(r, "o-1", "approved")
	if err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("o-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("the saga is %s (%v): the second approval was %s by %s, not by the child %s", st.Status, st.Failure, d.Receipt, d.State.SagaID, child)
	}
}

// A signal's id makes it idempotent across the tree: the same signal sent
// again after a child took it is a duplicate, not a second approval for
// the saga's own later await.
func TestSignalRetriedAfterAChildTookItIsADuplicate(t *testing.T) {
	r := newFrig(t, `
saga: order
steps:
  - id: approve
    saga: approval.yaml
  - id: final
    await: {signal: approved, timeout: 1h}
  - id: ship
    action: ship.send
`, map[string]string{"approval.yaml": approvalChild})
	r.start("o-1", nil)
	r.drain()
	send := func() (*engine.Delivered, error) {
		return r.coord.Signal(context.Background(), &engine.SignalParams{SagaID: "o-1", Name: "approved", ID: "mail-42", Payload: map[string]any{"by": "mia"}})
	}
	d, err := send()
	if err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("first: %+v %v", d, err)
	}
	first := d.State.SagaID
	r.drain()       // the child ends, the saga waits at its own await
	d, err = send() // the sender's retry after a lost answer
	if err == nil && d.Receipt != saga.ReceiptDuplicate {
		t.Fatalf("the same signal (id mail-42) sent again after %s took it: %s by %s; want a duplicate", first, d.Receipt, d.State.SagaID)
	}
}
