package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A branch fails its fork (its parent decides), while a child saga holds
// by its own definition: its parent waits on it, and a cancel of the
// parent stops the held child, which compensates, and the parent after it.
func TestAHeldChildSagaKeepsItsParentWaitingUntilACancel(t *testing.T) {
	t.Parallel()
	parent := `saga: parent
on_failure: hold
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - {id: kid, saga: child.yaml}
  - {id: last, action: last.do, with: {arg: last}}
`
	child := `saga: child
on_failure: hold
steps:
  - {id: c1, action: c.do, with: {arg: c1}, compensate: {action: c.undo, with: {arg: c1}}}
  - {id: c2, action: pay.do, with: {arg: c2}, retry: {attempts: 1}}
`
	r := newForkRig(t, parent, map[string]string{"child.yaml": child})
	r.fail["pay.do(c2)"] = true
	r.start("p", nil)
	r.drain()
	kid := durable.ChildID("p", "kid", 2, 0)
	if st := r.get(kid); st.Status != durable.StatusHeld {
		t.Fatalf("child %s: %s, want held", kid, st.Status)
	}
	if st := r.get("p"); st.Status != durable.StatusWaiting {
		t.Fatalf("parent: %s, want waiting on its held child", st.Status)
	}
	if _, err := r.coord.Cancel(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get(kid); st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != lang.ErrorTypeCancelled {
		t.Fatalf("child after the parent's cancel: %s %+v", st.Status, st.Failure)
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("parent after its cancel: %s", st.Status)
	}
	log := r.effects()
	if i := slices.Index(log, "c.undo(c1)"); i < 0 || !slices.Equal(log[i:], []string{"c.undo(c1)", "first.undo(first)"}) {
		t.Fatalf("effects %v", log)
	}
}

// A branch of a parallel does not hold: its failure fails its fork, and
// the fork's failure (a fork step is no action) compensates the saga.
func TestABranchFailureFailsItsForkEvenInAHoldingSaga(t *testing.T) {
	t.Parallel()
	src := `saga: fan
on_failure: hold
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - id: fan
    parallel:
      - steps:
          - {id: a1, action: a.do, with: {arg: a1}, compensate: {action: a.undo, with: {arg: a1}}}
      - steps:
          - {id: b1, action: b.do, with: {arg: b1}, retry: {attempts: 1}}
`
	r := newForkRig(t, src, nil)
	r.fail["b.do(b1)"] = true
	r.start("p", nil)
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("parent: %s, want compensated", st.Status)
	}
}

// Retry and compensate of a held saga answer a repeat without a change,
// and refuse a saga that is not held.
func TestRetryAndCompensateAreIdempotent(t *testing.T) {
	t.Parallel()
	src := `saga: order
on_failure: hold
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - {id: pay, action: pay.do, with: {arg: pay}, retry: {attempts: 1}}
`
	r := newForkRig(t, src, nil)
	r.fail["pay.do(pay)"] = true
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		r.start(id, nil)
	}
	r.drain()
	st1, err := r.coord.Retry(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	st2, err := r.coord.Retry(ctx, "a") // the first's answer was lost: asked again
	if err != nil || st2.Version != st1.Version {
		t.Fatalf("retry again: %v, version %d then %d", err, st1.Version, st2.Version)
	}
	c1, err := r.coord.Compensate(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if c2, err := r.coord.Compensate(ctx, "b"); err != nil || c2.Version != c1.Version {
		t.Fatalf("compensate again: %v", err)
	}
	r.drain()
	if st := r.get("a"); st.Status != durable.StatusHeld {
		t.Fatalf("a, retried while pay still fails: %s, want held again", st.Status)
	}
	if st := r.get("b"); st.Status != durable.StatusCompensated {
		t.Fatalf("b: %s", st.Status)
	}
	if _, err := r.coord.Retry(ctx, "b"); !errors.Is(err, saga.ErrInvalidEvent) {
		t.Fatalf("retry of a compensated saga: %v", err)
	}
}

// A hold_for longer than a queue's delay is the tick's timer, as a long
// wait's is: nothing is sent meanwhile, and once it is due the tick sends
// it and the saga compensates.
func TestALongHoldEndsByTheTick(t *testing.T) {
	t.Parallel()
	src := `saga: order
on_failure: hold
hold_for: 2h
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - {id: pay, action: pay.do, with: {arg: pay}, retry: {attempts: 1}}
`
	r := newForkRig(t, src, nil)
	r.fail["pay.do(pay)"] = true
	ctx := context.Background()
	r.start("o", nil)
	r.drain()
	if st := r.get("o"); st.Status != durable.StatusHeld {
		t.Fatalf("%s, want held", st.Status)
	}
	sent := r.queue.sent.Load()
	r.clock.Advance(time.Hour)
	r.drain()
	if n := r.queue.sent.Load() - sent; n != 0 {
		t.Fatalf("%d messages sent in the first hour of the hold, want none", n)
	}
	r.clock.Advance(time.Hour)
	if res, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil || res.Sent != 1 {
		t.Fatalf("tick at hold_for's end: %+v %v", res, err)
	}
	r.drain()
	endedByItsHold(t, r, "o", "pay")
}

// A callback's failure that holds the saga is written by the completer,
// which sends the hold's timer: when that send is lost (the completer
// gives up, or dies), the sweep sends it, as it does a waiting saga's, so
// that hold_for still ends the hold.
func TestTheSweepSendsAHeldSagasLostTimer(t *testing.T) {
	t.Parallel()
	src := `saga: order
on_failure: hold
hold_for: 10m
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - id: charge
    action: cards.charge_async
    with: {arg: charge}
    retry: {attempts: 1}
    callback: {timeout: 1h}
`
	r := newForkRig(t, src, nil)
	ctx := context.Background()
	r.start("o", nil)
	r.drain()
	r.mu.Lock()
	tok := r.tokens["charge"]
	r.mu.Unlock()
	r.queue.failSends.Store(1)
	if _, err := r.coord.FailCallback(ctx, tok, "Declined", "card declined"); err == nil {
		t.Fatal("the lost send was not reported")
	}
	if st := r.get("o"); st.Status != durable.StatusHeld || len(st.Outbox) != 1 {
		t.Fatalf("after the callback's failure: %s, outbox %+v; want held with its timer", st.Status, st.Outbox)
	}
	r.clock.Advance(time.Minute)
	res, err := r.coord.Sweep(ctx, &engine.SweepParams{IdleFor: 30 * time.Second})
	if err != nil || res.Resent != 1 {
		t.Fatalf("sweep: %+v %v; want the held saga's timer sent again", res, err)
	}
	r.drain()
	endedByItsHold(t, r, "o", "charge")
}

// A cancel's stop fails to cancel a held child saga until the stop is
// dead-lettered: the sweep cancels that child, as it does one running,
// since a held child runs on (held for ever here) and its parent waits on
// it.
func TestTheSweepCancelsAHeldChildItsForksStopMissed(t *testing.T) {
	t.Parallel()
	parent := `saga: parent
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - {id: kid, saga: child.yaml}
`
	child := `saga: child
on_failure: hold
steps:
  - {id: c1, action: c.do, with: {arg: c1}, compensate: {action: c.undo, with: {arg: c1}}}
  - {id: c2, action: pay.do, with: {arg: c2}, retry: {attempts: 1}}
`
	r := newForkRig(t, parent, map[string]string{"child.yaml": child})
	r.fail["pay.do(c2)"] = true
	ctx := context.Background()
	r.start("p", nil)
	r.drain()
	kid := durable.ChildID("p", "kid", 2, 0)
	if st := r.get(kid); st.Status != durable.StatusHeld {
		t.Fatalf("setup: child %s", st.Status)
	}
	r.store.setHook(func(op, key string) error {
		if op == "update" && key == kid {
			return errInjected
		}
		return nil
	})
	if _, err := r.coord.Cancel(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if r.dead() == 0 || r.get(kid).Status != durable.StatusHeld {
		t.Fatalf("setup: %d dead letters, child %s", r.dead(), r.get(kid).Status)
	}
	r.store.setHook(nil)
	for range 3 {
		r.sweep()
		r.drain()
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("parent %s after a cancel and three sweeps: child %s, never stopped", st.Status, r.get(kid).Status)
	}
	if log := r.effects(); countOf(log, "c.undo(c1)") != 1 || countOf(log, "first.undo(first)") != 1 {
		t.Fatalf("effects %v", log)
	}
}

// endedByItsHold checks that saga id, held on step, compensated once its
// hold ended: for that step's failure, its first step undone once.
func endedByItsHold(t *testing.T, r *rig, id, step string) {
	t.Helper()
	if st := r.get(id); st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Step != step {
		t.Fatalf("after hold_for: %s %+v", st.Status, st.Failure)
	}
	if countOf(r.effects(), "first.undo(first)") != 1 {
		t.Fatalf("effects %v", r.effects())
	}
}
