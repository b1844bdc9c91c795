package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
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
func childOf(r *frig, id string) string {
	fs, err := r.coord.Fork(context.Background(), id)
	if err != nil || fs == nil || len(fs.Current) == 0 {
		return ""
	}
	return fs.Current[0].SagaID
}

func signalTo(r *frig, id, name string) (*engine.Delivered, error) {
	return r.coord.Signal(context.Background(), &engine.SignalParams{SagaID: id, Name: name, Payload: map[string]any{"by": "mia"}})
}

// A signal sent to a saga reaches the run of its tree that awaits it:
// here its child saga, waiting on the await while the saga waits on the
// fork. The child goes on at once, and the saga with it.
func TestSignalReachesTheChildSagaThatAwaitsIt(t *testing.T) {
	r := newFrig(t, approvalParent, map[string]string{"approval.yaml": approvalChild})
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
	r := newFrig(t, approvalParent, map[string]string{"approval.yaml": approvalChild})
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
	r := newFrig(t, `
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
	r := newFrig(t, approvalParent, map[string]string{"approval.yaml": approvalChild})
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
	r := newFrig(t, src, nil)
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
