package engine_test

import (
	"context"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/engine"
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
