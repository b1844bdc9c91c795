package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// takesAnApprovalAndGoesOn drains r until run awaits, sends saga an
// approval, which run must take, and drains until run has passed its
// await.
func takesAnApprovalAndGoesOn(t *testing.T, r *rig, sagaID, run string) {
	t.Helper()
	if !r.drainUntil(func() bool {
		st, err := r.coord.Get(context.Background(), run)
		return err == nil && st.Status == durable.StatusWaiting
	}) {
		t.Fatalf("%s never awaited", run)
	}
	if d, err := signalTo(r, sagaID, "approved"); err != nil || d.State.SagaID != run {
		t.Fatalf("first approval: %+v %v; want it taken by %s", d, err, run)
	}
	if !r.drainUntil(func() bool {
		st, err := r.coord.Get(context.Background(), run)
		return err == nil && st.Vars["decision"] != nil
	}) {
		t.Fatalf("%s never passed its await", run)
	}
}

// keptOf counts the signals of name st keeps.
func keptOf(st *saga.State, name string) int {
	n := 0
	for _, d := range st.Kept {
		if d.Signal == name {
			n++
		}
	}
	return n
}

// A foreach one at a time whose body runs an action before its await: a
// child that has started keeps a signal it was handed, and its await has
// yet to take it.
const keptEdgesPickFirst = `
saga: batch
input: {items: list}
steps:
  - id: each
    foreach: "${input.items}"
    concurrency: 1
    steps:
      - {id: pick, action: svc.pick}
      - {id: wait, await: {signal: approved, timeout: 1h}, out: decision}
      - {id: ship, action: svc.ship}
`

// Iteration 0 took the first approval itself; the second is kept for
// iteration 1 (Delivery.Child), which starts with it and runs its pick.
// A third approval, sent then, goes to iteration 2: iteration 1 holds the
// one its only await takes already, so it has no room for another
// (RouteSignal.Later counts the awaits ahead against what the run keeps).
func TestKeptSignalGoesPastAStartedChildThatKeepsOneForItsAwait(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, keptEdgesPickFirst, nil)
	r.start("b-1", map[string]any{"items": []any{"a", "b", "c"}})
	it0, it1, it2 := durable.ChildID("b-1", "each", 1, 0), durable.ChildID("b-1", "each", 1, 1), durable.ChildID("b-1", "each", 1, 2)
	takesAnApprovalAndGoesOn(t, r, "b-1", it0)
	if d, err := signalTo(r, "b-1", "approved"); err != nil || d.State.SagaID != "b-1" || d.Receipt != saga.ReceiptKept {
		t.Fatalf("second approval: %+v %v; want kept by the saga for iteration 1", d, err)
	}
	if !r.drainUntil(func() bool {
		st, err := r.coord.Get(context.Background(), it1)
		return err == nil && st.Status == durable.StatusRunning
	}) {
		t.Fatal("iteration 1 never started")
	}
	if n := keptOf(r.get(it1), "approved"); n != 1 {
		t.Fatalf("iteration 1 started keeping %d approvals, want 1", n)
	}
	d, err := signalTo(r, "b-1", "approved")
	if err != nil {
		t.Fatalf("third approval: %v", err)
	}
	t.Logf("third approval: %s by %s", d.Receipt, d.State.SagaID)
	r.drain()
	if st := r.get("b-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("the saga is %s (%v); iteration 1 keeps %d approvals (it took 1), iteration 2 is %s: the third approval went to iteration 1, which held one already",
			st.Status, st.Failure, keptOf(r.get(it1), "approved"), r.get(it2).Status)
	}
}

// The same with two iterations at once, each running its pick when the
// approvals come: one goes to each.
func TestKeptSignalsGoOneToEachRunningChildBeforeItsAwait(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, strings.Replace(keptEdgesPickFirst, "concurrency: 1", "concurrency: 2", 1), nil)
	r.start("b-2", map[string]any{"items": []any{"a", "b"}})
	it0, it1 := durable.ChildID("b-2", "each", 1, 0), durable.ChildID("b-2", "each", 1, 1)
	if !r.drainUntil(func() bool {
		a, err0 := r.coord.Get(context.Background(), it0)
		b, err1 := r.coord.Get(context.Background(), it1)
		return err0 == nil && err1 == nil && a.Status == durable.StatusRunning && b.Status == durable.StatusRunning
	}) {
		t.Fatal("the iterations never started")
	}
	for i := range 2 {
		d, err := signalTo(r, "b-2", "approved")
		if err != nil {
			t.Fatalf("approval %d: %v", i+1, err)
		}
		t.Logf("approval %d: %s by %s", i+1, d.Receipt, d.State.SagaID)
	}
	r.drain()
	if st := r.get("b-2"); st.Status != durable.StatusSucceeded {
		t.Fatalf("the saga is %s (%v): iteration 0 %s, iteration 1 %s", st.Status, st.Failure, r.get(it0).Status, r.get(it1).Status)
	}
}

// The second approval is sent while the lane's next child is being
// launched: the router reads iteration 1 missing and keeps the approval
// for it in the saga (Delivery.Child = 2), after the launcher read the
// saga, so iteration 1 is created without it. Either the router, reading
// the child again after its keep, or the launcher, reading the saga again
// after its create, gives it to iteration 1.
func TestKeptSignalForAChildBeingCreatedReachesIt(t *testing.T) {
	t.Parallel()
	const src = `
saga: batch
input: {items: list}
steps:
  - id: each
    foreach: "${input.items}"
    concurrency: 1
    steps:
      - {id: wait, await: {signal: approved, timeout: 1h}, out: decision}
      - {id: ship, action: svc.ship}
`
	r := newForkRig(t, src, nil)
	r.start("b-3", map[string]any{"items": []any{"a", "b"}})
	it0, it1 := durable.ChildID("b-3", "each", 1, 0), durable.ChildID("b-3", "each", 1, 1)
	if !r.drainUntil(func() bool {
		st, err := r.coord.Get(context.Background(), it0)
		return err == nil && st.Status == durable.StatusWaiting
	}) {
		t.Fatal("iteration 0 never awaited")
	}
	if d, err := signalTo(r, "b-3", "approved"); err != nil || d.State.SagaID != it0 {
		t.Fatalf("first approval: %+v %v", d, err)
	}
	var (
		once sync.Once
		got  *engine.Delivered
		gerr error
	)
	r.store.setHook(func(op, key string) error {
		if op == "create" && key == it1 {
			once.Do(func() { got, gerr = signalTo(r, "b-3", "approved") })
		}
		return nil
	})
	r.drain()
	if gerr != nil || got == nil {
		t.Fatalf("second approval: %+v %v", got, gerr)
	}
	t.Logf("second approval, sent as iteration 1 is created: %s by %s (saga keeps %+v)", got.Receipt, got.State.SagaID, got.State.Kept)
	if st := r.get("b-3"); st.Status != durable.StatusSucceeded {
		t.Fatalf("the saga is %s (%v); iteration 1 is %s keeping %d approvals: the approval kept for it as it was created never reached it",
			st.Status, st.Failure, r.get(it1).Status, keptOf(r.get(it1), "approved"))
	}
}

// A nested fork: the saga's only child (a foreach of one) forks in turn,
// a foreach one at a time whose iterations await. Once grandchild 0 has
// passed its await, the next approval is for grandchild 1, yet to start.
// Every child of the saga's own fork has started, so the saga names none
// of them: it gives the signal to the child under which one has yet to
// start, which keeps it for grandchild 1.
func TestKeptSignalForAGrandchildYetToStartReachesIt(t *testing.T) {
	t.Parallel()
	const src = `
saga: outer
input: {groups: list}
steps:
  - id: each
    foreach: "${input.groups}"
    as: group
    concurrency: 1
    steps:
      - id: inner
        foreach: "${group}"
        concurrency: 1
        steps:
          - {id: wait, await: {signal: approved, timeout: 1h}, out: decision}
          - {id: ship, action: svc.ship}
`
	r := newForkRig(t, src, nil)
	var mu sync.Mutex
	var created []string
	r.store.setHook(func(op, key string) error {
		if op == "create" {
			mu.Lock()
			created = append(created, key)
			mu.Unlock()
		}
		return nil
	})
	r.start("n-1", map[string]any{"groups": []any{[]any{"a", "b"}}})
	waiting := func() string {
		mu.Lock()
		ids := append([]string(nil), created...)
		mu.Unlock()
		for _, id := range ids {
			if st, err := r.coord.Get(context.Background(), id); err == nil && st.Status == durable.StatusWaiting && st.Parent != nil && st.Parent.Step == "inner" {
				return id
			}
		}
		return ""
	}
	var g0 string
	if !r.drainUntil(func() bool { g0 = waiting(); return g0 != "" }) {
		t.Fatal("grandchild 0 never awaited")
	}
	if d, err := signalTo(r, "n-1", "approved"); err != nil || d.State.SagaID != g0 {
		t.Fatalf("first approval: %+v %v; want taken by %s", d, err, g0)
	}
	if !r.drainUntil(func() bool {
		st, err := r.coord.Get(context.Background(), g0)
		return err == nil && st.Vars["decision"] != nil
	}) {
		t.Fatal("grandchild 0 never passed its await")
	}
	d, err := signalTo(r, "n-1", "approved")
	if err != nil {
		t.Fatalf("second approval: %v", err)
	}
	t.Logf("second approval: %s by %s", d.Receipt, d.State.SagaID)
	r.drain()
	if st := r.get("n-1"); st.Status != durable.StatusSucceeded {
		mu.Lock()
		ids := append([]string(nil), created...)
		mu.Unlock()
		var runs []string
		for _, id := range ids {
			c := r.get(id)
			runs = append(runs, id+"="+string(c.Status))
		}
		t.Fatalf("the saga is %s (%v); runs %v: the second approval, for grandchild 1, was kept by the saga for child 0, which had started", st.Status, st.Failure, runs)
	}
}

// A signal that no running iteration can take any more, kept by the saga
// for an iteration that has yet to start, goes to one that has not started
// when it is kept: here iteration 0 took the first approval itself (it
// awaited it when it came) and ran on past its await, so the second is
// for iteration 1, not for iteration 0 by count.
func TestSignalKeptForAChildYetToStartSkipsTheChildrenStarted(t *testing.T) {
	t.Parallel()
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
	r := newForkRig(t, src, nil)
	r.start("b-1", map[string]any{"items": []any{"a", "b", "c"}})
	it0 := durable.ChildID("b-1", "each", 2, 0)
	takesAnApprovalAndGoesOn(t, r, "b-1", it0)
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
