package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// A fork's stop: the message that a cancel, the saga's deadline or a
// failed child sends to cancel the fork's running children, lane by lane.

const threeWaitingBranches = `
saga: stopped
steps:
  - id: all
    parallel:
      - steps: [{id: a, await: {signal: go_a, timeout: 1h}}]
      - steps: [{id: b, await: {signal: go_b, timeout: 1h}}]
      - steps: [{id: c, await: {signal: go_c, timeout: 1h}}]
`

// threeWaitingLanes starts saga p of threeWaitingBranches and runs it until
// each branch waits on its await and the saga on the fork; child maps each
// branch's run to its lane.
func threeWaitingLanes(t *testing.T) (r *rig, child map[string]int) {
	t.Helper()
	r = newForkRig(t, threeWaitingBranches, nil)
	r.start("p", nil)
	r.drain()
	fs, err := r.coord.Fork(context.Background(), "p")
	if err != nil || fs == nil || len(fs.Current) != 3 {
		t.Fatalf("the fork's current children: %+v %v", fs, err)
	}
	child = map[string]int{}
	for lane, c := range fs.Current {
		child[c.SagaID] = lane
	}
	return r, child
}

// A fork's stop cancels the child of every lane. A lane it has cancelled,
// and whose messages it has sent, stays done when a later lane fails: the
// next delivery of the stop does only the lanes left. Here delivery d
// fails on the child of lane d-1 only, once; a stop that does every lane
// again on each delivery fails all three, and the rig's third receive
// moves it to the dead-letter queue with the saga waiting for ever.
func TestForkStopKeepsTheLanesItHasCancelled(t *testing.T) {
	t.Parallel()
	r, child := threeWaitingLanes(t)
	deliveries := 0
	failed := map[int]bool{}
	r.store.setHook(func(op, key string) error {
		if op == "forkfail" {
			deliveries++ // each delivery of the stop fails the fork first
			return nil
		}
		lane, ok := child[key]
		if ok && op == "get" && lane == deliveries-1 && !failed[lane] {
			failed[lane] = true
			return errInjected
		}
		return nil
	})
	if _, err := r.coord.Cancel(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if n := r.dead(); n != 0 {
		t.Fatalf("%d messages dead-lettered after %d deliveries of the stop; errors:\n%s", n, deliveries, r.handleErrors())
	}
	if st := r.get("p"); !st.Status.Final() {
		t.Fatalf("the saga is %s, want it ended", st.Status)
	}
	for id := range child {
		if st := r.get(id); !st.Status.Final() {
			t.Errorf("child %s is %s, want it ended", id, st.Status)
		}
	}
	if deliveries != 2 {
		t.Errorf("the stop was delivered %d times, want 2: the first does lanes 1 and 2, the second lane 0", deliveries)
	}
}

// A record of the lanes done that fails to be written costs a delivery,
// never a lane: the next delivery does those lanes again (a cancel of a
// cancelled child sends its messages again) and records them. The stop
// is handled three times in a row, before any child moves: the first
// fails on lane 0 and its record fails; the second does lanes 0 and 2
// (2 again), fails on lane 1 and records 0 and 2; the third does lane 1
// and records every lane.
func TestForkStopWhoseRecordFailsDoesTheLanesAgain(t *testing.T) {
	t.Parallel()
	r, child := threeWaitingLanes(t)
	deliveries, records := 0, 0
	failed := map[int]bool{}
	r.store.setHook(func(op, key string) error {
		switch op {
		case "forkfail":
			deliveries++
		case "forkcancelled":
			records++
			if records == 1 {
				return errInjected
			}
		case "get":
			if lane, ok := child[key]; ok && lane == deliveries-1 && !failed[lane] {
				failed[lane] = true
				return errInjected
			}
		}
		return nil
	})
	ctx := context.Background()
	if _, err := r.coord.Cancel(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	ds, err := r.q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10})
	if err != nil || len(ds) != 1 || !strings.Contains(string(ds[0].Body), `"stop"`) {
		t.Fatalf("after the cancel: %d messages %v, want the stop alone", len(ds), err)
	}
	key := durable.ForkKey("p", "all", 1)
	for i, want := range [][]int{nil, {0, 2}, {0, 1, 2}} {
		_, err := r.coord.Handle(ctx, ds[0].Body)
		if (err == nil) != (i == 2) {
			t.Fatalf("delivery %d of the stop: %v", i+1, err)
		}
		rec, err := r.store.Store.ForkGet(ctx, &durable.ForkGetParams{Key: key})
		if err != nil || !slices.Equal(rec.Cancelled, want) {
			t.Fatalf("after delivery %d: %+v %v, want lanes %v recorded", i+1, rec, err, want)
		}
	}
	if err := r.q.Delete(ctx, &durable.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if n := r.dead(); n != 0 {
		t.Fatalf("%d messages dead-lettered; errors:\n%s", n, r.handleErrors())
	}
	if st := r.get("p"); !st.Status.Final() {
		t.Fatalf("the saga is %s, want it ended", st.Status)
	}
	if records != 3 {
		t.Errorf("%d records written, want 3 (the last of every lane)", records)
	}
}

// A stop that did every lane records them all, so that a repeat of its
// message (a lost delete, a duplicate) does none again: it reads no child
// and sends no child's messages.
func TestForkStopRepeatedAfterItsWorkDoesNoLaneAgain(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, threeWaitingBranches, nil)
	r.start("p", nil)
	r.drain()
	ctx := context.Background()
	if _, err := r.coord.Cancel(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	ds, err := r.q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10})
	if err != nil || len(ds) != 1 {
		t.Fatalf("after the cancel: %d messages %v, want the stop alone", len(ds), err)
	}
	if _, err := r.coord.Handle(ctx, ds[0].Body); err != nil {
		t.Fatal(err)
	}
	rec, err := r.store.Store.ForkGet(ctx, &durable.ForkGetParams{Key: durable.ForkKey("p", "all", 1)})
	if err != nil || !slices.Equal(rec.Cancelled, []int{0, 1, 2}) {
		t.Fatalf("after the stop: %+v %v, want every lane recorded", rec, err)
	}
	var childReads atomic.Int64 // the hook runs on the workers' goroutines too
	r.store.setHook(func(op, key string) error {
		if op == "get" && strings.HasPrefix(key, "p.all.") {
			childReads.Add(1)
		}
		return nil
	})
	if _, err := r.coord.Handle(ctx, ds[0].Body); err != nil {
		t.Fatal(err)
	}
	if n := childReads.Load(); n != 0 {
		t.Errorf("the repeated stop read %d children, want none", n)
	}
	r.drain()
	if st := r.get("p"); !st.Status.Final() || r.dead() != 0 {
		t.Fatalf("the saga is %s, %d dead letters", st.Status, r.dead())
	}
}

// failGetOnce fails the first read of one saga.
type failGetOnce struct {
	durable.Store
	id     string
	failed bool
}

func (s *failGetOnce) SagaGet(ctx context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	if p.SagaID == s.id && !s.failed {
		s.failed = true
		return nil, errInjected
	}
	return s.Store.SagaGet(ctx, p)
}

// The record of the lanes a stop has done is written on the emulators by
// each function that stops forks, signed as it, so that make iam
// evaluates the call against its policy: the advance function handles a
// stop, the compensate function a failed child's end, the sweep a lost
// stop, all through cancelLanes.
func TestForkStopRecordsItsLanesOnTheEmulators(t *testing.T) {
	b := awstest.New(t)
	plan := mustCompile(t, threeWaitingBranches)
	ctx := context.Background()
	local, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: b.Queue, Actions: engine.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	// drain handles what is queued with c, failing the test on an error.
	drain := func(c *engine.Coordinator, wantStop bool) *durable.Delivery {
		t.Helper()
		for idle := 0; idle < 3; time.Sleep(50 * time.Millisecond) {
			idle++
			for _, qn := range durable.QueueNames() {
				ds, err := b.Queue.Receive(ctx, &durable.ReceiveParams{Queue: qn, Max: 10})
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					idle = 0
					if wantStop && strings.Contains(string(d.Body), `"stop"`) {
						return &d
					}
					if _, err := c.Handle(ctx, d.Body); err != nil {
						t.Fatalf("handle %s: %v", d.Body, err)
					}
					if err := b.Queue.Delete(ctx, &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if wantStop {
			t.Fatal("no stop message was queued")
		}
		return nil
	}
	for _, principal := range []string{"AdvanceFunction", "CompensateFunction", "SweepFunction"} {
		id := "stopped-" + principal
		if _, err := local.Start(ctx, &engine.StartParams{Plan: plan, SagaID: id}); err != nil {
			t.Fatal(err)
		}
		drain(local, false)
		fs, err := local.Fork(ctx, id)
		if err != nil || fs == nil || len(fs.Current) != 3 {
			t.Fatalf("%s: the fork's current children: %+v %v", id, fs, err)
		}
		if _, err := local.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		stop := drain(local, true)
		store, queue := b.As(t, principal)
		as, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: &failGetOnce{Store: store, id: fs.Current[0].SagaID}, Queue: queue, Actions: engine.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := as.Handle(ctx, stop.Body); err == nil {
			t.Fatalf("%s: the stop succeeded though the read of lane 0's child failed", principal)
		}
		parts := strings.Split(fs.Current[0].SagaID, ".") // id.step.visit.index
		seq, _ := strconv.ParseUint(parts[2], 10, 64)
		rec, err := b.Store.ForkGet(ctx, &durable.ForkGetParams{Key: durable.ForkKey(id, "all", seq)})
		if err != nil || !slices.Equal(rec.Cancelled, []int{1, 2}) {
			t.Fatalf("%s: the fork record after the failed stop: %+v %v; want children 1 and 2 cancelled", principal, rec, err)
		}
		if _, err := as.Handle(ctx, stop.Body); err != nil {
			t.Fatalf("%s: the stop again: %v", principal, err)
		}
		if err := b.Queue.Delete(ctx, &durable.DeleteParams{Queue: stop.Queue, ReceiptHandle: stop.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		drain(local, false)
		if st, err := local.Get(ctx, id); err != nil || !st.Status.Final() {
			t.Fatalf("%s: the saga after its stop: %+v %v, want it ended", id, st, err)
		}
	}
}

// A parent cancelled while its fork's children run joins and
// compensates. Its stop records a failure from outside the fork (the
// failed child one past the last), so the join brings neither outputs nor
// a child's failure; the join must still be accepted, or it goes to the
// dead-letter queue and the parent waits forever. The same holds for a
// parent whose deadline passes while its children run.
func TestCancelWhileChildrenRunJoinsAndCompensates(t *testing.T) {
	t.Parallel()
	r := newHandRig(t)
	plan := mustCompile(t, `
saga: cancelled
steps:
  - id: first
    action: svc.first
    compensate: {action: svc.first_undo}
  - id: both
    parallel:
      - steps: [{id: left, action: svc.left, compensate: {action: svc.left_undo}}]
      - steps: [{id: right, action: svc.right, compensate: {action: svc.right_undo}}]
`)
	ctx := context.Background()
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	r.deliver(forSaga("p")) // first runs; the fork launches both branches
	if st := r.get("p"); st.Status != durable.StatusWaiting {
		t.Fatalf("after first: %s, want waiting on the fork", st.Status)
	}
	if _, err := r.coord.Cancel(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	st := r.get("p")
	if st.Status != durable.StatusCompensated {
		_, err := r.deliver(func(m durable.Message) bool { return m.Kind == durable.KindJoin })
		t.Fatalf("cancelled while its children ran: %s at version %d, want compensated (the join's error: %v)", st.Status, st.Version, err)
	}
	if got := r.actions.called("p/first.compensate"); len(got) == 0 {
		t.Errorf("first was never compensated")
	}
}

// A cancel lands between the fork's write and its launches (the launcher
// died): the cancel's stop creates the children stopped, and the saga
// compensates without running any branch.
func TestCancelBeforeTheLaunchesRunsNoBranch(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, twoBranchYAML, nil)
	ctx := context.Background()
	r.store.setHook(func(op, key string) error {
		if op == "create" && key != "p" {
			return errInjected
		}
		return nil
	})
	// The first step forks at once: the start's launches fail.
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: r.plan, SagaID: "p"}); err == nil {
		t.Fatal("setup: the launches did not fail")
	}
	r.store.setHook(nil)
	if _, err := r.coord.Cancel(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	st := r.get("p")
	if st.Status != durable.StatusCompensated || len(r.effects()) != 0 {
		t.Fatalf("parent %s %+v, effects %v", st.Status, st.Failure, r.effects())
	}
}

// A cancel that lands while a failed fork undoes its children (the parent
// is running, the fork's catch will route the failure): the cancel is
// accepted, so it must win over the catch.
func TestCancelWhileAFailedForkUndoesBeatsItsCatch(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, catchForkYAML, nil)
	r.fail["b.one(b1)"] = true
	r.start("p", nil)
	undoing := func() bool {
		st := r.get("p")
		cur, ok := st.Pending()
		return ok && cur.Fork && cur.Compensating
	}
	if !r.drainUntil(undoing) {
		t.Fatalf("setup: the parent never undid its children: %s", r.get("p").Status)
	}
	if _, err := r.coord.Cancel(context.Background(), "p"); err != nil {
		t.Logf("cancel refused: %v", err)
		return // refusing is fine too
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != lang.ErrorTypeCancelled {
		t.Fatalf("a cancel accepted while the fork was undone: parent %s, output %v; want compensated, cancelled", st.Status, st.Output)
	}
}

// A cancel of a saga whose fork's branch itself waits on a fork must
// reach every level although one store call among the many it makes
// fails once, and the caller does not call Cancel again (a client gives
// up; the sweep is not due for an hour). The stop is a queued message:
// Cancel writes the saga and sends it, and its handler, retried as any
// message is, stops one level. Done inside the caller's Cancel, one
// failure anywhere in the tree would fail the whole call, and the
// grandchild would keep waiting, its parents with it, until the sweep.
func TestACancelReachesEveryLevelOfNestedForksWithoutTheCaller(t *testing.T) {
	t.Parallel()
	const src = `saga: nest
steps:
  - id: outer
    parallel:
      - steps:
          - {id: book, action: rooms.book, with: {arg: room}, compensate: {action: rooms.cancel, with: {arg: room}}}
          - id: inner
            parallel:
              - steps:
                  - {id: hold, await: {signal: go, timeout: 72h}}
              - steps:
                  - {id: pay, action: cards.charge, with: {arg: card}, compensate: {action: cards.refund, with: {arg: card}}}
      - steps:
          - {id: car, action: cars.book, with: {arg: car}, compensate: {action: cars.cancel, with: {arg: car}}}
`
	r := newForkRig(t, src, nil)
	ctx := context.Background()
	r.start("p", nil)
	r.drain() // the grandchild awaits its signal; everything else succeeded
	branch := durable.ChildID("p", "outer", 1, 0)
	held := durable.ChildID(branch, "inner", 2, 0)
	if st := r.get(held); st.Status != durable.StatusWaiting {
		t.Fatalf("setup: the grandchild is %s", st.Status)
	}
	failed := false
	r.store.setHook(func(op, key string) error {
		if op == "update" && key == held && !failed {
			failed = true
			return errInjected // the grandchild's cancel fails, once
		}
		return nil
	})
	_, err := r.coord.Cancel(ctx, "p")
	t.Logf("cancel: %v", err) // the caller does not try again
	r.drain()
	for _, id := range []string{"p", branch, held} {
		if st := r.get(id); !st.Status.Final() {
			t.Errorf("%s is %s after the cancel and every message handled: the cancel never reached it (handle errors: %s)", id, st.Status, r.handleErrors())
		}
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Errorf("the saga is %s, want compensated", st.Status)
	}
	if e := r.effects(); countOf(e, "rooms.cancel(room)") != 1 || countOf(e, "cards.refund(card)") != 1 || countOf(e, "cars.cancel(car)") != 1 {
		t.Errorf("effects %v: want each booking undone once", e)
	}
}

// A fork stopped from outside (a cancel) while a lane's child has ended
// uncounted (its end's message lost): the stop sends that child's
// message again. When the read of the child it needs for that fails, the
// stop fails with it and comes back, rather than going on without it and
// leaving the saga waiting on the fork for good.
func TestForkStopRetriesWhenItCannotReadAnEndedChild(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, twoBranchYAML, nil)
	flight := durable.ChildID("p", "book", 1, 1)
	r.queue.setHook(func(m durable.Message) (bool, error) {
		return m.Kind == durable.KindEnded && m.SagaID == flight, nil // its end's message is lost
	})
	r.start("p", nil)
	r.drain()
	r.queue.setHook(nil)
	if st := r.get("p"); st.Status != durable.StatusWaiting {
		t.Fatalf("the saga is %s, want waiting on the fork", st.Status)
	}
	gets := 0
	r.store.setHook(func(op, key string) error {
		if op == "get" && key == flight {
			if gets++; gets == 2 { // the cancel's read passes; the stop's, after it, fails
				return fmt.Errorf("%w: %w", durable.ErrThrottled, errInjected)
			}
		}
		return nil
	})
	if _, err := r.coord.Cancel(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("the saga is %s after its cancel (%d reads of the flight), want compensated", st.Status, gets)
	}
}
