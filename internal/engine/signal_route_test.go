package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A saga whose child saga awaits the approval: senders know the saga's
// id, not the child's.
const (
	approvalParent = `
saga: order
steps:
  - id: reserve
    action: stock.reserve
    compensate: {action: stock.release}
  - id: approve
    saga: approval.yaml
  - id: ship
    action: ship.send
`
	approvalChild = `
saga: approval
steps:
  - id: ask
    action: mail.ask
  - id: wait_approval
    await: {signal: approved, timeout: 1h}
    out: decision
  - id: done
    succeed: {output: "${vars.decision}"}
`
)

// childOf is the id of the first current child of the fork id waits on,
// "" while it waits on none.
func childOf(r *rig, id string) string {
	fs, err := r.coord.Fork(context.Background(), id)
	if err != nil || fs == nil || len(fs.Current) == 0 {
		return ""
	}
	return fs.Current[0].SagaID
}

func signalTo(r *rig, id, name string) (*engine.Delivered, error) {
	return r.coord.Signal(context.Background(), &engine.SignalParams{SagaID: id, Name: name, Payload: map[string]any{"by": "mia"}})
}

// A signal sent to a saga reaches the run of its tree that awaits it:
// here its child saga, waiting on the await while the saga waits on the
// fork. The child goes on at once, and the saga with it.
func TestSignalReachesTheChildSagaThatAwaitsIt(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, approvalParent, map[string]string{"approval.yaml": approvalChild})
	r.start("o-1", nil)
	r.drain() // the child waits on its await (an hour: no message), the saga on the fork
	child := childOf(r, "o-1")
	if st := r.get(child); st.Status != durable.StatusWaiting {
		t.Fatalf("the child is %s before the signal", st.Status)
	}
	d, err := signalTo(r, "o-1", "approved")
	if err != nil || d.Receipt != saga.ReceiptApplied || d.State.SagaID != child {
		t.Fatalf("signal to the saga: %+v %v; want applied by %s", d, err, child)
	}
	r.drain()
	if st := r.get("o-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("the saga is %s (%v), want succeeded", st.Status, st.Failure)
	}
}

// A signal sent before the child saga exists is kept by the saga and
// given to the child as it starts: its await takes it without pausing.
func TestSignalBeforeTheForkIsGivenToTheChildThatAwaitsIt(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, approvalParent, map[string]string{"approval.yaml": approvalChild})
	r.start("o-2", nil)
	d, err := signalTo(r, "o-2", "approved")
	if err != nil || d.Receipt != saga.ReceiptKept || d.State.SagaID != "o-2" {
		t.Fatalf("signal before the fork: %+v %v; want kept by the saga", d, err)
	}
	r.drain()
	if st := r.get("o-2"); st.Status != durable.StatusSucceeded {
		t.Fatalf("the saga is %s (%v), want succeeded", st.Status, st.Failure)
	}
	if again, err := signalTo(r, "o-2", "approved"); err == nil {
		t.Fatalf("a second approval after the end: %+v, want refused", again)
	}
}

// Several runs awaiting the signal at once: refused, naming them; a
// signal no await of the tree takes: refused.
func TestSignalAwaitedByManyRunsOrByNoneIsRefused(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, `
saga: both
steps:
  - id: split
    parallel:
      - steps:
          - {id: a, await: {signal: go, timeout: 1h}}
      - steps:
          - {id: b, await: {signal: go, timeout: 1h}}
`, nil)
	r.start("p-1", nil)
	r.drain()
	_, err := signalTo(r, "p-1", "go")
	if !errors.Is(err, saga.ErrNotReceiving) || !strings.Contains(err.Error(), durable.ChildID("p-1", "split", 1, 0)) || !strings.Contains(err.Error(), durable.ChildID("p-1", "split", 1, 1)) {
		t.Fatalf("a signal two branches await: %v; want refused naming both", err)
	}
	if _, err := signalTo(r, "p-1", "nobody"); !errors.Is(err, saga.ErrNotReceiving) {
		t.Fatalf("a signal nothing awaits: %v; want refused", err)
	}
	// Sent to one branch, it is taken there.
	if d, err := signalTo(r, durable.ChildID("p-1", "split", 1, 1), "go"); err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("to the branch: %+v %v", d, err)
	}
	// Now one run awaits it: the saga's signal goes there.
	if d, err := signalTo(r, "p-1", "go"); err != nil || d.Receipt != saga.ReceiptApplied || d.State.SagaID != durable.ChildID("p-1", "split", 1, 0) {
		t.Fatalf("to the saga with one branch awaiting: %+v %v", d, err)
	}
	r.drain()
	if st := r.get("p-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("the saga is %s (%v)", st.Status, st.Failure)
	}
}

// A signal sent while the child runs but before it reaches its await is
// kept by the child, whose await then takes it.
func TestSignalKeptByTheRunningChildThatWillAwaitIt(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, approvalParent, map[string]string{"approval.yaml": approvalChild})
	r.start("o-3", nil)
	// Run until the child exists and its first action is due, not run.
	var child string
	if !r.drainUntil(func() bool {
		if child = childOf(r, "o-3"); child == "" {
			return false
		}
		st, err := r.coord.Get(context.Background(), child)
		return err == nil && st.Status == durable.StatusRunning
	}) {
		t.Fatal("the child never started")
	}
	d, err := signalTo(r, "o-3", "approved")
	if err != nil || d.Receipt != saga.ReceiptKept || d.State.SagaID != child {
		t.Fatalf("signal while the child runs: %+v %v; want kept by %s", d, err, child)
	}
	r.drain()
	if st := r.get("o-3"); st.Status != durable.StatusSucceeded {
		t.Fatalf("the saga is %s (%v), want succeeded", st.Status, st.Failure)
	}
}

// A branch awaits a signal; the caller signals the saga it started (the
// parent: branch ids are derived and unlisted, and no document says to
// signal them). The parent, waiting on its fork, must not keep the signal
// for an await of its own that does not exist (ReceiptKept, "delivered")
// while the branch's await times out and the saga compensates. Either the
// signal reaches the branch that awaits it, or the caller is told it went
// nowhere.
func TestASignalForABranchsAwaitIsNotSwallowedByTheParent(t *testing.T) {
	t.Parallel()
	src := `saga: approve
steps:
  - id: fan
    parallel:
      - steps:
          - {id: ask, action: asks.send, with: {arg: ask}}
          - {id: wait_ok, await: {signal: approved, timeout: 1h}, out: ok}
      - steps: [{id: other, action: others.do, with: {arg: other}}]
  - {id: after, action: after.do, with: {arg: after}}
`
	r := newForkRig(t, src, nil)
	ctx := context.Background()
	r.start("p", nil)
	r.drain() // the branch waits on its signal
	d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "p", Name: "approved", Payload: map[string]any{"by": "boss"}, ID: "ok-1"})
	if err != nil {
		t.Logf("the signal was refused (fine): %v", err)
		return
	}
	r.clock.Advance(2 * time.Hour)
	if _, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusSucceeded {
		t.Fatalf("the signal was answered %s, yet the branch never got it: parent %s %+v", d.Receipt, st.Status, st.Failure)
	}
}

// A foreach whose every iteration awaits an approval, one at a time: each
// approval sent to the saga reaches an iteration that has yet to take
// one. Sent before the fork, or while iteration 0 runs past its await.
func TestSignalsReachEachIterationThatAwaitsOne(t *testing.T) {
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
	in := map[string]any{"items": []any{"a", "b"}}
	t.Run("both sent before the fork", func(t *testing.T) {
		r := newForkRig(t, src, nil)
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
		r := newForkRig(t, src, nil)
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
	t.Parallel()
	r := newForkRig(t, `
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
	t.Parallel()
	r := newForkRig(t, `
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

type readCounter struct {
	durable.Store
	sagaGets, forkGets atomic.Int64
}

func (s *readCounter) SagaGet(ctx context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	s.sagaGets.Add(1)
	return s.Store.SagaGet(ctx, p)
}

func (s *readCounter) ForkGet(ctx context.Context, p *durable.ForkGetParams) (*durable.ForkRecord, error) {
	s.forkGets.Add(1)
	return s.Store.ForkGet(ctx, p)
}

// Routing a signal reads the current child of each lane of the fork the
// saga waits on, and theirs, down to lang.MaxForkDepth: one signal sent
// to a tree of nested foreach steps costs lanes^depth reads (here 10 lanes
// at two levels: 111 reads; four levels of 100 lanes: 10^8), paid by
// whoever may send a signal, synchronously in Signal. It should be
// bounded by one level's lanes.
func TestRoutingASignalReadsABoundedNumberOfRuns(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, `
saga: deep
input: {items: list}
steps:
  - id: outer
    foreach: "${input.items}"
    concurrency: 10
    steps:
      - id: inner
        foreach: "${input.items}"
        concurrency: 10
        steps:
          - {id: ready, await: {signal: ready, timeout: 1h}}
          - {id: go, await: {signal: go, timeout: 1h}}
`, nil)
	items := []any{}
	for i := range 10 {
		items = append(items, i)
	}
	r.start("d-1", map[string]any{"items": items})
	r.drain()
	cs := &readCounter{Store: r.store.Store}
	c, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: cs, Queue: r.queue, Actions: engine.NewRegistry(), Clock: r.clock, Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Signal(context.Background(), &engine.SignalParams{SagaID: "d-1", Name: "go"})
	if err != nil {
		t.Fatal(err)
	}
	gets, forks := cs.sagaGets.Load(), cs.forkGets.Load()
	t.Logf("one signal: %s by %s after %d saga reads and %d fork reads", d.Receipt, d.State.SagaID, gets, forks)
	if gets+forks > 1+lang.MaxConcurrency {
		t.Fatalf("one signal read %d items of the store (lanes^depth): unbounded by anything but MaxForkDepth", gets+forks)
	}
}

// A signal kept by the saga for a child yet to start, which its launcher
// created meanwhile and handed the signal to: giving it to that child
// again finds it held, and the sender is told what its send did, kept,
// never "duplicate" (a sender told duplicate would think an earlier send
// of its own took it).
func TestSignalKeptForAChildHandedItMeanwhileIsKeptNotDuplicate(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, approvalParent, map[string]string{"approval.yaml": approvalChild})
	r.start("o-9", nil)
	r.drain() // the child waits on its await, the saga on the fork
	child := childOf(r, "o-9")
	payload := map[string]any{"by": "mia"}
	// The child holds the signal, as when its launcher handed it over.
	if _, err := r.coord.Signal(context.Background(), &engine.SignalParams{SagaID: child, Name: "approved", Payload: payload, ID: "sig-9"}); err != nil {
		t.Fatal(err)
	}
	st := r.get("o-9")
	got, err := r.coord.GiveToCreatedChild(context.Background(), st, r.plan, saga.Delivery{Signal: "approved", ID: "sig-9", Child: 1}, payload)
	if err != nil || got != nil {
		t.Fatalf("giving the kept signal to the child that holds it: %+v %v; want nothing (the saga's kept stands)", got, err)
	}
}
