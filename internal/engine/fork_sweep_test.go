package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// The children's first messages are lost (the sends fail after the
// children were written): nothing moves until the sweep, which does not
// list branches and iterations, looks at each lane's current child of the
// parent waiting on the fork and sends its message again.
func TestSweepSendsAgainWhatAForksChildrenNeed(t *testing.T) {
	r := newRig(t, "testdata/fork.yaml")
	r.queue.failSends.Store(2) // both lanes' first messages
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: "fan-1", Input: map[string]any{"items": []any{"a", "b", "c"}}}); err == nil {
		t.Fatal("the start reported its children's messages sent")
	}
	r.drain()
	if st := r.get("fan-1"); st.Status != durable.StatusWaiting {
		t.Fatalf("fan-1 is %s before the sweep", st.Status)
	}
	res, err := r.coord.Sweep(context.Background(), &engine.SweepParams{})
	if err != nil || res.Resent != 2 {
		t.Fatalf("sweep: %+v %v, want 2 children's messages sent again", res, err)
	}
	r.drain()
	st := r.get("fan-1")
	if st.Status != durable.StatusSucceeded || len(st.Vars["parcels"].([]any)) != 3 {
		t.Fatalf("fan-1 %s: %v", st.Status, st.Vars)
	}
}

// A fork's child whose messages keep being lost is sent again at most
// MaxResends times per version, as any saga is, and then left for an
// operator: counted in LeftForOperator, never silently skipped.
func TestSweepLeavesAForksStuckChildForAnOperator(t *testing.T) {
	r := newRig(t, "testdata/fork.yaml")
	r.queue.failSends.Store(2) // both lanes' first messages
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: "fan-2", Input: map[string]any{"items": []any{"a", "b", "c"}}}); err == nil {
		t.Fatal("the start reported its children's messages sent")
	}
	r.drain()
	lose := func() { // every message sent again is lost before anyone handles it
		for {
			ds, err := r.q.Receive(context.Background(), &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) == 0 && r.q.Len(durable.QueueAdvance) == 0 {
				return
			}
			for _, d := range ds {
				_ = r.q.Delete(context.Background(), &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle})
			}
			r.clock.Advance(durable.MaxDelay)
		}
	}
	for i := range engine.DefaultMaxResends {
		r.clock.Advance(30 * time.Minute)
		res, err := r.coord.Sweep(context.Background(), &engine.SweepParams{IdleFor: 20 * time.Minute})
		if err != nil || res.Resent != 2 || res.LeftForOperator != 0 {
			t.Fatalf("sweep %d: %+v %v, want both children sent again", i+1, res, err)
		}
		lose()
	}
	r.clock.Advance(30 * time.Minute)
	res, err := r.coord.Sweep(context.Background(), &engine.SweepParams{IdleFor: 20 * time.Minute})
	if err != nil || res.Resent != 0 || res.LeftForOperator != 2 {
		t.Fatalf("the sweep after %d re-sends: %+v %v, want both children left for an operator", engine.DefaultMaxResends, res, err)
	}
}
