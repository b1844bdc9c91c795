package engine_test

import (
	"fmt"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
)

// What the sweep recovers of a fork. A message "lost" here is
// one that went to the dead-letter queue (its handler failed on each of
// its three receives), as PROTOCOL "The sweep" describes.

// failFor makes the store fail calls op on keys for which match holds,
// until off is called.
func failFor(r *frig, match func(op, key string) bool) (off func()) {
	r.store.setHook(func(op, key string) error {
		if match(op, key) {
			return fmt.Errorf("%w: %w", durable.ErrThrottled, errInjected)
		}
		return nil
	})
	return func() { r.store.setHook(nil) }
}

func sweepUntilDone(t *testing.T, r *frig, want durable.Status) {
	t.Helper()
	for range 3 {
		r.sweep()
		r.drain()
	}
	if st := r.get("p"); st.Status != want {
		t.Fatalf("parent %s after three sweeps, want %s; effects %v", st.Status, want, r.effects())
	}
}

// A lost ended message (its count throttled on every receive): the sweep
// sends the child's outbox again.
func TestSweepRecoversALostEnded(t *testing.T) {
	r, in := shipRig(t, 2, 4)
	r.start("p", in)
	off := failFor(r, func(op, key string) bool { return op == "forkcount" })
	r.drain()
	off()
	if r.dead() == 0 {
		t.Fatal("setup: nothing dead-lettered")
	}
	sweepUntilDone(t, r, durable.StatusSucceeded)
	checkShipped(t, r, in, durable.StatusSucceeded)
}

// A lost launch: the count of child 0 landed, the create of its successor
// failed on every receive of the ended message.
func TestSweepRecoversALostLaunch(t *testing.T) {
	r, in := shipRig(t, 1, 3)
	r.start("p", in)
	off := failFor(r, func(op, key string) bool { return op == "create" && key == durable.ChildID("p", "each", 2, 1) })
	r.drain()
	off()
	if r.dead() == 0 {
		t.Fatal("setup: nothing dead-lettered")
	}
	sweepUntilDone(t, r, durable.StatusSucceeded)
	checkShipped(t, r, in, durable.StatusSucceeded)
}

// A lost undo: the child's EventUndo write failed on every receive.
func TestSweepRecoversALostUndo(t *testing.T) {
	r, in := shipRig(t, 2, 4)
	r.fail["last.do(last)"] = true
	r.start("p", in)
	off := failFor(r, func(op, key string) bool { return op == "update" && key == durable.ChildID("p", "each", 2, 2) })
	r.drain()
	off()
	if r.dead() == 0 {
		t.Fatal("setup: nothing dead-lettered")
	}
	sweepUntilDone(t, r, durable.StatusCompensated)
	checkShipped(t, r, in, durable.StatusCompensated)
}

// A lost ended message two forks down: a branch waits on its own foreach,
// whose child's end was never counted.
func TestSweepRecoversALostEndedOneForkDown(t *testing.T) {
	src := `saga: nested
steps:
  - id: outer
    parallel:
      - steps:
          - id: inner
            foreach: "${[1, 2, 3]}"
            concurrency: 1
            steps: [{id: w, action: ws.do, with: {arg: "${item}"}}]
      - steps: [{id: z, action: zs.do, with: {arg: z}}]
  - {id: last, action: last.do, with: {arg: last}}
`
	r := newFrig(t, src, nil)
	r.start("p", nil)
	innerKey := durable.ForkKey(durable.ChildID("p", "outer", 1, 0), "inner", 1)
	off := failFor(r, func(op, key string) bool { return op == "forkcount" && key == innerKey })
	r.drain()
	off()
	if r.dead() == 0 {
		t.Fatal("setup: nothing dead-lettered")
	}
	sweepUntilDone(t, r, durable.StatusSucceeded)
}
