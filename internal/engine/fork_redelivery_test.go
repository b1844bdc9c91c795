package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A fork's messages lost, repeated or redelivered. Redelivery alone (no
// sweep) must finish the saga with each effect applied once.
//
// The first tests inject an error in each crash window of a fork: the
// error stands for a crash at that point; the handler returns it, and the
// message comes back. The tests after them are scenarios of the
// fault-injection simulation (internal/sim) driven by hand on newHandRig,
// whose queue delivers messages in the order the test picks, with faults
// placed on one send or one create.

const shipYAML = `saga: ship
input: {items: list}
steps:
  - {id: open, action: orders.open, with: {arg: open}, compensate: {action: orders.close, with: {arg: close}}}
  - id: each
    foreach: "${input.items}"
    concurrency: CONC
    steps:
      - {id: send, action: shipping.send, with: {arg: "${item}"}, out: parcel, compensate: {action: shipping.recall, with: {arg: "${item}"}}}
    out: parcels
  - {id: last, action: last.do, with: {arg: last}}
`

func shipRig(t *testing.T, conc, n int) (*rig, map[string]any) {
	src := replaceOnce(shipYAML, "CONC", fmt.Sprint(conc))
	r := newForkRig(t, src, nil)
	items := []any{}
	for i := range n {
		items = append(items, fmt.Sprintf("s%02d", i))
	}
	return r, map[string]any{"items": items}
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	return s
}

// checkShipped: the saga ended as want, each item shipped once, and (when
// it compensated) recalled once.
func checkShipped(t *testing.T, r *rig, in map[string]any, want durable.Status) {
	t.Helper()
	st := r.get("p")
	log := r.effects()
	if st.Status != want {
		t.Fatalf("parent %s %+v, want %s; effects %v; handle errors:\n%s", st.Status, st.Failure, want, log, firstLines(r.handleErrors(), 4))
	}
	for _, it := range in["items"].([]any) {
		sent := countOf(log, fmt.Sprintf("shipping.send(%v)", it))
		if sent != 1 && (want == durable.StatusSucceeded || sent > 1) {
			t.Errorf("%v shipped %d times", it, sent)
		}
		if want == durable.StatusCompensated && countOf(log, fmt.Sprintf("shipping.recall(%v)", it)) != sent {
			t.Errorf("%v shipped %d, recalled %d times", it, sent, countOf(log, fmt.Sprintf("shipping.recall(%v)", it)))
		}
	}
}

// Each window fails once; redelivery alone (no sweep) must finish the saga.
func TestForkCrashWindowsRecoverOnRedelivery(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		store func(op, key string) bool
		queue func(m durable.Message) bool
	}{
		{name: "child create", store: func(op, key string) bool { return op == "create" && key != "p" }},
		{name: "child's first send", queue: func(m durable.Message) bool { return m.SagaID != "p" && m.Step == "send" && m.Kind == "" }},
		{name: "count", store: func(op, key string) bool { return op == "forkcount" }},
		{name: "successor create", store: func(op, key string) bool { return op == "create" && key == durable.ChildID("p", "each", 2, 3) }},
		{name: "ended send", queue: func(m durable.Message) bool { return m.Kind == durable.KindEnded }},
		{name: "join send", queue: func(m durable.Message) bool { return m.Kind == durable.KindJoin }},
		{name: "join read", store: func(op, key string) bool { return op == "forkget" }},
		{name: "parent's join write", store: func(op, key string) bool { return op == "update" && key == "p" }},
	}
	for _, tc := range cases {
		for _, conc := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/concurrency %d", tc.name, conc), func(t *testing.T) {
				t.Parallel()
				r, in := shipRig(t, conc, 5)
				r.start("p", in)
				r.drainUntil(func() bool { return r.get("p").Status == durable.StatusWaiting }) // open runs: the parent forks
				fails := 1
				if tc.store != nil {
					r.store.setHook(func(op, key string) error {
						if fails > 0 && tc.store(op, key) {
							fails--
							return errInjected
						}
						return nil
					})
				}
				if tc.queue != nil {
					r.queue.setHook(func(m durable.Message) (bool, error) {
						if fails > 0 && tc.queue(m) {
							fails--
							return false, errInjected
						}
						return false, nil
					})
				}
				r.drain()
				if fails > 0 {
					t.Fatalf("the window was never reached")
				}
				checkShipped(t, r, in, durable.StatusSucceeded)
			})
		}
	}
}

// The same windows while the fork fails and its children are undone.
func TestFailedForkCrashWindowsRecoverOnRedelivery(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		store func(op, key string) bool
		queue func(m durable.Message) bool
	}{
		{name: "undo send", queue: func(m durable.Message) bool { return m.Kind == durable.KindUndo }},
		{name: "undone child's ended send", queue: func(m durable.Message) bool { return m.Kind == durable.KindEnded && m.Queue == durable.QueueAdvance }},
		{name: "recall send", queue: func(m durable.Message) bool {
			return m.Step == "send" && m.Queue == durable.QueueCompensate && m.Kind == ""
		}},
		{name: "stop's ForkStop", store: func(op, key string) bool { return op == "forkstop" }},
		{name: "cancel of a lane's child", store: func(op, key string) bool { return op == "update" && key != "p" }},
		{name: "parent's next undo send", queue: func(m durable.Message) bool {
			return m.Kind == durable.KindUndo && m.SagaID == durable.ChildID("p", "each", 2, 0)
		}},
	}
	for _, tc := range cases {
		for _, conc := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/concurrency %d", tc.name, conc), func(t *testing.T) {
				t.Parallel()
				r, in := shipRig(t, conc, 6)
				r.fail["shipping.send(s04)"] = true
				r.start("p", in)
				fails := 1
				if tc.store != nil {
					r.store.setHook(func(op, key string) error {
						if fails > 0 && tc.store(op, key) {
							fails--
							return errInjected
						}
						return nil
					})
				}
				if tc.queue != nil {
					r.queue.setHook(func(m durable.Message) (bool, error) {
						if fails > 0 && tc.queue(m) {
							fails--
							return false, errInjected
						}
						return false, nil
					})
				}
				r.drain()
				if fails > 0 {
					t.Skip("the window was not reached in this run")
				}
				checkShipped(t, r, in, durable.StatusCompensated)
			})
		}
	}
}

// Every message is delivered twice: the fork's counts, joins, undos and
// launches are idempotent; each item ships once and is recalled once.
func TestForkUnderDuplicateDeliveryShipsAndRecallsOnce(t *testing.T) {
	t.Parallel()
	for _, fail := range []bool{false, true} {
		for _, conc := range []int{1, 3} {
			t.Run(fmt.Sprintf("fail %v concurrency %d", fail, conc), func(t *testing.T) {
				t.Parallel()
				r, in := shipRig(t, conc, 7)
				want := durable.StatusSucceeded
				if fail {
					r.fail["shipping.send(s04)"] = true
					want = durable.StatusCompensated
				}
				r.queue.dup = true
				r.start("p", in)
				r.drain()
				checkShipped(t, r, in, want)
			})
		}
	}
}

// A join whose write lands and whose send fails is sent again when the
// join message comes back: it finds the fork joined and sends the outbox
// of the version it wrote, as the step handler does for a repeat (rule
// 3). Otherwise the parent stays running (or compensating) with nothing
// queued, and only the sweep, 35 minutes on, can move it.
func TestJoinWhoseSendFailedIsSentAgain(t *testing.T) {
	t.Parallel()
	r := newHandRig(t)
	plan := mustCompile(t, `
saga: joined
steps:
  - id: both
    parallel:
      - steps: [{id: left, action: svc.left}]
      - steps: [{id: right, action: svc.right}]
  - id: after
    action: svc.after
`)
	ctx := context.Background()
	failed := false
	r.queue.setHook(func(m durable.Message) (bool, error) {
		if m.SagaID == "p" && m.Step == "after" && !failed {
			failed = true // the join's send, once
			return false, errHandFault
		}
		return false, nil
	})
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if !failed {
		t.Fatal("the join's send was never tried")
	}
	if st := r.get("p"); st.Status != durable.StatusSucceeded {
		t.Fatalf("after a join whose send failed once: %s at version %d with %d messages queued, want succeeded", st.Status, st.Version, len(r.hand.msgs))
	}
}

// An undo whose write lands and whose send fails is sent again when the
// KindUndo message comes back and finds the child undoing and not final.
// Otherwise the child stays compensating with nothing queued, and its
// parent waits on it.
func TestUndoWhoseSendFailedIsSentAgain(t *testing.T) {
	t.Parallel()
	r := newHandRig(t)
	plan := mustCompile(t, `
saga: undone
steps:
  - id: both
    parallel:
      - steps: [{id: left, action: svc.left, compensate: {action: svc.left_undo}}]
      - steps: [{id: right, action: svc.right, compensate: {action: svc.right_undo}}]
  - id: after
    action: svc.after
`)
	r.actions.fail = func(c saga.Call) bool { return c.Step == "after" }
	failed := false
	r.queue.setHook(func(m durable.Message) (bool, error) {
		if m.Queue == durable.QueueCompensate && m.Kind == durable.KindStep && strings.HasPrefix(m.SagaID, "p.") && !failed {
			failed = true // the first child's undo: its compensation's send, once
			return false, errHandFault
		}
		return false, nil
	})
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if !failed {
		t.Fatal("no child's undo was sent")
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("after an undo whose send failed once: %s at version %d with %d messages queued, want compensated", st.Status, st.Version, len(r.hand.msgs))
	}
	for _, id := range []string{"p.both.1.0", "p.both.1.1"} {
		if st := r.get(id); st.Status != durable.StatusCompensated {
			t.Errorf("child %s: %s, want compensated (undone)", id, st.Status)
		}
	}
}

// The parent's side of an undo whose send failed: the write of
// EventUndone (one child undone, the next one's turn) lands and its send,
// the next child's KindUndo, fails; the child's ended message comes back,
// finds the parent moved on to the next child, and sends that undo again.
// Otherwise the parent waits compensating and the child stays succeeded.
func TestUndoneWhoseSendFailedIsSentAgain(t *testing.T) {
	t.Parallel()
	r := newHandRig(t)
	plan := mustCompile(t, `
saga: undone
steps:
  - id: both
    parallel:
      - steps: [{id: left, action: svc.left, compensate: {action: svc.left_undo}}]
      - steps: [{id: right, action: svc.right, compensate: {action: svc.right_undo}}]
  - id: after
    action: svc.after
`)
	r.actions.fail = func(c saga.Call) bool { return c.Step == "after" }
	failed := false
	r.queue.setHook(func(m durable.Message) (bool, error) {
		if m.Kind == durable.KindUndo && m.SagaID == "p.both.1.0" && !failed {
			failed = true // the undo of child 0, sent by the write that noted child 1 undone
			return false, errHandFault
		}
		return false, nil
	})
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if !failed {
		t.Fatal("child 0's undo was never sent")
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("after an undone whose send failed once: %s at version %d with %d messages queued, want compensated (child 0: %s)", st.Status, st.Version, len(r.hand.msgs), r.get("p.both.1.0").Status)
	}
}

// A launch from the fork's outbox that comes after the fork failed never
// runs its child: no new step starts anywhere in a failed fork
// (docs/PROTOCOL.md, "Failure and cancel"). Here the fork's first send
// dies after child 0; child 0 fails and its count's cancel of the other
// lanes dies before it creates child 1 stopped; the fork's message,
// redelivered, sends the outbox again, and the launch of child 1 must
// read the fork record and find it failed.
func TestChildLaunchedAfterTheForkFailedNeverRuns(t *testing.T) {
	t.Parallel()
	r := newHandRig(t)
	plan := mustCompile(t, `
saga: late
input: {items: list}
steps:
  - id: first
    action: svc.first
  - id: each
    foreach: "${input.items}"
    concurrency: 3
    steps: [{id: work, action: svc.work}]
`)
	ctx := context.Background()
	creates := 0
	r.store.setHook(func(op, id string) error {
		if op == "create" && id == "p.each.2.1" {
			if creates++; creates <= 2 { // the fork's launch, then the cancel's
				return errHandFault
			}
		}
		return nil
	})
	r.actions.fail = func(c saga.Call) bool { return c.SagaID == "p.each.2.0" }
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p", Input: map[string]any{"items": []any{"a", "b", "c"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.deliver(forSaga("p")); err == nil {
		t.Fatal("the fork's launch of child 1 did not fail")
	}
	r.deliver(forSaga("p.each.2.0")) // child 0 fails and compensates
	if _, err := r.deliver(func(m durable.Message) bool { return m.Kind == durable.KindEnded }); err == nil {
		t.Fatal("the count's cancel of child 1 did not fail")
	}
	r.deliver(forSaga("p")) // the fork's message again: its outbox is sent again
	r.drain()
	// Child 2 was launched before child 0 failed (one launch failing does
	// not keep the others back) and may finish; child 1, launched only
	// when the outbox is sent again after the failure, must not run.
	if got := r.actions.called("p.each.2.1/"); len(got) > 0 {
		t.Errorf("a child created after the fork failed ran %v", got)
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Errorf("parent: %s, want compensated", st.Status)
	}
}

// A repeated ended message of a child that licensed its lane's next
// child, handled after another child failed, does not stop the lane while
// the child it licensed still runs. Stopping it would make the fork look
// closed: the parent would get its join, find that child running and
// fail with ErrDamagedState, the error of a message that goes to the
// dead-letter queue. Here child 0's count launches child 2, whose first
// send fails, so child 0's ended message comes back after child 1
// failed; its count had licensed child 2 before the failure, and the
// repeat must not take the failure for the lane's own.
func TestRepeatedEndedNeverStopsALaneWhoseChildRuns(t *testing.T) {
	t.Parallel()
	r := newHandRig(t)
	plan := mustCompile(t, `
saga: lanes
input: {items: list}
steps:
  - id: first
    action: svc.first
  - id: each
    foreach: "${input.items}"
    concurrency: 2
    steps: [{id: work, action: svc.work}]
`)
	ctx := context.Background()
	r.actions.fail = func(c saga.Call) bool { return c.SagaID == "p.each.2.1" }
	failed := false
	r.queue.setHook(func(m durable.Message) (bool, error) {
		if m.SagaID == "p.each.2.2" && !failed {
			failed = true // child 2's first message, once
			return false, errHandFault
		}
		return false, nil
	})
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p", Input: map[string]any{"items": []any{"a", "b", "c", "d"}}}); err != nil {
		t.Fatal(err)
	}
	r.deliver(forSaga("p"))          // the fork launches children 0 and 1
	r.deliver(forSaga("p.each.2.0")) // child 0 succeeds
	if _, err := r.deliver(func(m durable.Message) bool { return m.Kind == durable.KindEnded }); err == nil {
		t.Fatal("child 0's count did not fail on child 2's send")
	}
	r.deliver(forSaga("p.each.2.1"))                                                                           // child 1 fails
	r.deliver(func(m durable.Message) bool { return m.Kind == durable.KindEnded && m.SagaID == "p.each.2.1" }) // its count cancels child 2
	r.deliver(func(m durable.Message) bool { return m.Kind == durable.KindEnded && m.SagaID == "p.each.2.0" }) // child 0's ended again
	// The join, sent by the repeat, comes before child 2's action.
	if ok, err := r.deliver(func(m durable.Message) bool { return m.Kind == durable.KindJoin }); ok && errors.Is(err, engine.ErrDamagedState) {
		t.Fatalf("the join failed as poison while child 2 is %s: %v", r.get("p.each.2.2").Status, err)
	}
	for range 100 {
		if len(r.hand.msgs) == 0 {
			break
		}
		if _, err := r.deliver(func(durable.Message) bool { return true }); errors.Is(err, engine.ErrDamagedState) {
			t.Fatalf("a message failed as poison: %v (child 2: %s)", err, r.get("p.each.2.2").Status)
		}
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Errorf("parent: %s, want compensated", st.Status)
	}
}

const twoBranchYAML = `saga: trip
steps:
  - id: book
    parallel:
      - steps:
          - {id: hotel, action: hotels.book, with: {arg: hotel}, out: h, compensate: {action: hotels.cancel, with: {arg: hotel}}}
      - steps:
          - {id: flight, action: flights.book, with: {arg: flight}, out: f, compensate: {action: flights.cancel, with: {arg: flight}}}
    out: booked
  - {id: pay, action: cards.charge, with: {arg: pay}}
`

// The join's write lands and its outbox (the parent's next action) is not
// sent (a crash between them). PROTOCOL, crash windows: "the message comes
// back and finds m + 1: the stored outbox is sent (rule 3)". The join
// handler follows rule 3 too: dropped as stale instead, the parent would
// sit in running with its next message unsent until a sweep found it
// idle (20 to 35 minutes, and only with a sweep deployed).
func TestAJoinWhoseOutboxWasLostIsSentOnRedelivery(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, twoBranchYAML, nil)
	fails := 1
	r.queue.setHook(func(m durable.Message) (bool, error) {
		if m.SagaID == "p" && m.Step == "pay" && fails > 0 {
			fails--
			return false, errInjected
		}
		return false, nil
	})
	r.start("p", nil)
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusSucceeded {
		t.Fatalf("parent %s at version %d after the join's redelivery, no sweep: want succeeded (handle errors: %s)",
			st.Status, st.Version, firstLines(r.handleErrors(), 2))
	}
}

const awaitThenForkYAML = `saga: gated
steps:
  - {id: gate, await: {signal: go, timeout: 72h}}
  - id: fan
    parallel:
      - steps: [{id: x, action: xs.do, with: {arg: x}}]
      - steps: [{id: y, action: ys.do, with: {arg: y}}]
  - {id: after, action: after.run, with: {arg: after}}
`

// A signal leads the saga into a fork; the signal's write lands and its
// outbox (the launches) fails. The error says "send it again, with the
// same id, or the sweep sends it": the retry with the same id is a
// duplicate, and its re-sent outbox launches the children, rather than
// leave them uncreated until the sweep comes.
func TestASignalRetriedWithItsIDLaunchesTheFork(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, awaitThenForkYAML, nil)
	ctx := context.Background()
	r.start("p", nil)
	r.drain()
	fails := 1
	r.store.setHook(func(op, key string) error {
		if op == "create" && key != "p" && fails > 0 {
			fails--
			return errInjected
		}
		return nil
	})
	if _, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "p", Name: "go", ID: "go-1"}); err == nil {
		t.Fatal("setup: the launch did not fail")
	}
	d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "p", Name: "go", ID: "go-1"})
	if err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusSucceeded {
		_, cerr := r.coord.Get(ctx, durable.ChildID("p", "fan", 2, 0))
		t.Fatalf("after the retried signal (%s): parent %s, child 0: %v; want the fork launched and the saga done", d.Receipt, st.Status, cerr)
	}
}
