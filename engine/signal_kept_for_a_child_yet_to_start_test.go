package engine_test

import (
	"context"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
)

// A signal that no running iteration can take any more, kept by the saga
// for an iteration that has yet to start, goes to one that has not started
// when it is kept: here iteration 0 took the first approval itself (it
// awaited it when it came) and ran on past its await, so the second is
// for iteration 1, not for iteration 0 by count.
func TestSignalKeptForAChildYetToStartSkipsTheChildrenStarted(t *testing.T) {
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
	r := newFrig(t, src, nil)
	r.start("b-1", map[string]any{"items": []any{"a", "b", "c"}})
	it0 := durable.ChildID("b-1", "each", 2, 0)
	if !r.drainUntil(func() bool {
		st, err := r.coord.Get(context.Background(), it0)
		return err == nil && st.Status == durable.StatusWaiting
	}) {
		t.Fatal("iteration 0 never awaited")
	}
	if d, err := signalTo(r, "b-1", "approved"); err != nil || d.State.SagaID != it0 {
		t.Fatalf("first approval: %+v %v; want it taken by iteration 0", d, err)
	}
	if !r.drainUntil(func() bool {
		st, err := r.coord.Get(context.Background(), it0)
		return err == nil && st.Status == durable.StatusRunning && st.Vars["decision"] != nil
	}) {
		t.Fatal("iteration 0 never passed its await")
	}
	for i := range 2 {
		d, err := signalTo(r, "b-1", "approved")
		if err != nil {
			t.Fatalf("approval %d: %v", i+2, err)
		}
		t.Logf("approval %d: %s by %s", i+2, d.Receipt, d.State.SagaID)
	}
	r.drain()
	if st := r.get("b-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("the saga is %s (%v): an approval kept for an iteration yet to start went to one that had started", st.Status, st.Failure)
	}
}
