package engine_test

import (
	"context"
	"fmt"
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
	t.Parallel()
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
	t.Parallel()
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

// What the sweep recovers of a fork's lost messages. A message "lost"
// below is one that went to the dead-letter queue (its handler failed on
// each of its three receives), as PROTOCOL "The sweep" describes.

// failFor makes the store fail calls op on keys for which match holds,
// until off is called.
func failFor(r *rig, match func(op, key string) bool) (off func()) {
	r.store.setHook(func(op, key string) error {
		if match(op, key) {
			return fmt.Errorf("%w: %w", durable.ErrThrottled, errInjected)
		}
		return nil
	})
	return func() { r.store.setHook(nil) }
}

func sweepUntilDone(t *testing.T, r *rig, want durable.Status) {
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	r := newForkRig(t, src, nil)
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

// The join message reaches the dead-letter queue (its handler throttled
// on every receive: here ForkGet fails while the queue gives up on it).
// PROTOCOL "The sweep" promises to send again "the message of a saga
// whose message went to a dead-letter queue": for a parent waiting on a
// fork whose lanes are all exhausted, the sweep sends the join again,
// or the parent waits for ever although every child ended.
func TestSweepRecoversAJoinThatWentToTheDeadLetterQueue(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, twoBranchYAML, nil)
	forkKey := durable.ForkKey("p", "book", 1)
	reads := 0
	r.store.setHook(func(op, key string) error {
		if op == "forkget" && key == forkKey {
			if reads++; reads > 2 { // the launches' reads pass; the join's fail
				return fmt.Errorf("%w: %w", durable.ErrThrottled, errInjected)
			}
		}
		return nil
	})
	r.start("p", nil)
	r.drain()
	if r.dead() == 0 {
		t.Fatalf("setup: no message dead-lettered (parent %s)", r.get("p").Status)
	}
	r.store.setHook(nil) // the throttling passes
	for range 3 {
		r.sweep()
		r.drain()
	}
	if st := r.get("p"); st.Status != durable.StatusSucceeded {
		t.Fatalf("after three sweeps the parent is %s, waiting on a fork whose children all succeeded: the join is lost for good", st.Status)
	}
}

const waitingBranchYAML = `saga: slow
steps:
  - id: fan
    parallel:
      - steps:
          - {id: book, action: rooms.book, with: {arg: room}, compensate: {action: rooms.cancel, with: {arg: room}}}
          - {id: hold, await: {signal: go, timeout: 72h}}
      - steps:
          - {id: book2, action: cars.book, with: {arg: car}, compensate: {action: cars.cancel, with: {arg: car}}}
  - {id: after, action: after.run, with: {arg: after}}
`

// A cancel of a parent waiting on a fork is written, and the send of its
// stop (the message that does the ForkFail and the cancel of the running
// children) fails; the caller never calls Cancel again. PROTOCOL: the
// sweep closes "a start, cancel or resume whose write landed and whose
// send did not, when the caller never tries again". For a parent waiting
// on a fork, the sweep sends the parent's own outbox (its stop) as well as
// its children's; otherwise the branch that awaits a signal keeps
// waiting, and the cancelled saga only compensates when the await times
// out, 72 hours later.
func TestSweepRedoesTheStopOfACancelWhoseSendFailed(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, waitingBranchYAML, nil)
	ctx := context.Background()
	r.start("p", nil)
	r.drain() // branch 0 waits on its signal; branch 1 succeeded
	if st := r.get("p"); st.Status != durable.StatusWaiting {
		t.Fatalf("setup: parent %s", st.Status)
	}
	r.queue.setHook(func(m durable.Message) (bool, error) {
		if m.Kind == durable.KindStop {
			return false, errInjected
		}
		return false, nil
	})
	if _, err := r.coord.Cancel(ctx, "p"); err == nil {
		t.Fatal("setup: the stop's send did not fail")
	}
	r.queue.setHook(nil)
	for range 3 {
		r.sweep()
		r.drain()
	}
	st := r.get("p")
	if st.Status != durable.StatusCompensated {
		t.Fatalf("%s after a cancel and three sweeps (1.5 hours): the fork's children were never stopped; child 0 is %s",
			st.Status, r.get(durable.ChildID("p", "fan", 1, 0)).Status)
	}
}

// A cancel's stop records the fork's failure, and then fails to cancel a
// running branch until the stop is dead-lettered. The sweep must cancel
// that branch: the fork record says the fork failed, so the sweep's
// check for a lost stop (no failure recorded) does not see it, and the
// branch's own outbox, sent again, does not stop it.
func TestSweepCancelsABranchItsForksStopMissed(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, waitingBranchYAML, nil)
	ctx := context.Background()
	r.start("p", nil)
	r.drain() // branch 0 waits on its signal; branch 1 succeeded
	held := durable.ChildID("p", "fan", 1, 0)
	r.store.setHook(func(op, key string) error {
		if op == "update" && key == held {
			return errInjected
		}
		return nil
	})
	if _, err := r.coord.Cancel(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if r.dead() == 0 || r.get(held).Status != durable.StatusWaiting {
		t.Fatalf("setup: %d dead letters, branch %s", r.dead(), r.get(held).Status)
	}
	r.store.setHook(nil)
	for range 3 {
		r.sweep()
		r.drain()
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("%s after a cancel and three sweeps: branch 0 is %s, never stopped", st.Status, r.get(held).Status)
	}
}
