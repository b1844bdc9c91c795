package engine_test

// Fork messages lost, repeated or delivered out of order: scenarios of
// the fault-injection simulation (internal/sim) driven by hand, with a
// queue whose messages are delivered in the order the test picks (a
// message whose handling fails stays queued, as SQS redelivers it), and
// faults placed on one send or one create. Each asserts that the saga
// still ends, and ends as the protocol says.

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

// A parent cancelled while its fork's children run joins and
// compensates. Its stop records a failure from outside the fork (the
// failed child one past the last), so the join brings neither outputs nor
// a child's failure; the join must still be accepted, or it goes to the
// dead-letter queue and the parent waits forever. The same holds for a
// parent whose deadline passes while its children run.
func TestCancelWhileChildrenRunJoinsAndCompensates(t *testing.T) {
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

// A join whose write lands and whose send fails is sent again when the
// join message comes back: it finds the fork joined and sends the outbox
// of the version it wrote, as the step handler does for a repeat (rule
// 3). Otherwise the parent stays running (or compensating) with nothing
// queued, and only the sweep, 35 minutes on, can move it.
func TestJoinWhoseSendFailedIsSentAgain(t *testing.T) {
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
	r.q.failSend = func(msgs []durable.Message) bool {
		for _, m := range msgs {
			if m.SagaID == "p" && m.Step == "after" && !failed {
				failed = true // the join's send, once
				return true
			}
		}
		return false
	}
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if !failed {
		t.Fatal("the join's send was never tried")
	}
	if st := r.get("p"); st.Status != durable.StatusSucceeded {
		t.Fatalf("after a join whose send failed once: %s at version %d with %d messages queued, want succeeded", st.Status, st.Version, len(r.q.msgs))
	}
}

// An undo whose write lands and whose send fails is sent again when the
// KindUndo message comes back and finds the child undoing and not final.
// Otherwise the child stays compensating with nothing queued, and its
// parent waits on it.
func TestUndoWhoseSendFailedIsSentAgain(t *testing.T) {
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
	r.q.failSend = func(msgs []durable.Message) bool {
		for _, m := range msgs {
			if m.Queue == durable.QueueCompensate && m.Kind == durable.KindStep && strings.HasPrefix(m.SagaID, "p.") && !failed {
				failed = true // the first child's undo: its compensation's send, once
				return true
			}
		}
		return false
	}
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if !failed {
		t.Fatal("no child's undo was sent")
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("after an undo whose send failed once: %s at version %d with %d messages queued, want compensated", st.Status, st.Version, len(r.q.msgs))
	}
	for _, id := range []string{"p.both.1.0", "p.both.1.1"} {
		if st := r.get(id); st.Status != durable.StatusCompensated {
			t.Errorf("child %s: %s, want compensated (undone)", id, st.Status)
		}
	}
}

// A parent that parks while it undoes the children of a fork that
// failed, and is resumed, undoes the children still to undo before the
// steps before the fork: the park keeps the fork's undo list (UndoNext).
// Child 0 below succeeded and must be undone, or the saga ends
// compensated with left's effect in place.
func TestResumeAfterAParkedUndoUndoesTheChildrenLeft(t *testing.T) {
	r := newHandRig(t)
	plan := mustCompile(t, `
saga: parked
steps:
  - id: three
    parallel:
      - steps: [{id: left, action: svc.left, compensate: {action: svc.left_undo}}]
      - steps: [{id: mid, action: svc.mid, compensate: {action: svc.mid_undo, retry: {attempts: 1}}}]
      - steps: [{id: right, action: svc.right}]
`)
	ctx := context.Background()
	undoFails := true
	r.actions.fail = func(c saga.Call) bool {
		return c.Step == "right" || (c.Step == "mid" && c.Compensation && undoFails)
	}
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("after mid's undo failed: %s, want compensation_failed", st.Status)
	}
	// The operator fixes mid's undo and resumes the child, then the parent.
	undoFails = false
	// (The child's end reaches the parent parked on it, which goes on by
	// itself: the parent's resume then finds nothing parked.)
	for _, id := range []string{"p.three.1.1", "p"} {
		if _, err := r.coord.Resume(ctx, id); err != nil && !(id == "p" && errors.Is(err, saga.ErrInvalidEvent)) {
			t.Fatalf("resume %s: %v", id, err)
		}
		r.drain()
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("after the resumes: %s, want compensated", st.Status)
	}
	if got := r.actions.called("p.three.1.0/left.compensate"); len(got) == 0 {
		t.Errorf("child 0 (left) succeeded and was never undone: calls %v, child %s", r.actions.calls, r.get("p.three.1.0").Status)
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
	r.store.failCreate = func(id string) bool {
		if id == "p.each.2.1" {
			creates++
			return creates <= 2 // the fork's launch, then the cancel's
		}
		return false
	}
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
	r.q.failSend = func(msgs []durable.Message) bool {
		for _, m := range msgs {
			if m.SagaID == "p.each.2.2" && !failed {
				failed = true // child 2's first message, once
				return true
			}
		}
		return false
	}
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
		if len(r.q.msgs) == 0 {
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

// A parent waiting on its fork whose deadline is less than a queue's
// delay (15 minutes) after the fork transition gets a message for it,
// from the fork's outbox or from the tick. Without one the deadline never
// fires: the children are never stopped by it (docs/PROTOCOL.md, "Failure
// and cancel"), and the parent waits past it for as long as they run.
func TestParentDeadlineWithinAQueueDelayIsSent(t *testing.T) {
	r := newHandRig(t)
	plan := mustCompile(t, `
saga: deadline
timeout: 5m
steps:
  - id: first
    action: svc.first
  - id: both
    parallel:
      - steps: [{id: left, action: svc.left}]
      - steps: [{id: right, action: svc.right}]
`)
	ctx := context.Background()
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	r.deliver(forSaga("p")) // first runs; the fork launches both branches
	if st := r.get("p"); st.Status != durable.StatusWaiting || st.WakeAt().IsZero() {
		t.Fatalf("after the fork: %s, timer %s; want waiting on the deadline", st.Status, st.WakeAt())
	}
	r.clock.Advance(6 * time.Minute)
	if _, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range r.q.msgs {
		if m.SagaID == "p" {
			return // the deadline's message, from the fork or the tick
		}
	}
	t.Errorf("past the parent's deadline, no message for it was ever sent (queued: %d messages, all for its children)", len(r.q.msgs))
}

// A parent waiting on its fork whose deadline is further than a queue's
// delay gets the tick's message for it, and the step handler applies the
// deadline: the fork's cursor is neither a wait nor a running action, and
// the message must not be taken for an action's. Taken for one, it would
// call the services with the fork step as an action of no name, fail
// until the dead-letter queue, and the tick would send another each time
// its memory of the timer lapsed (every 30 minutes past due): tens of
// thousands of messages per saga, and the deadline never applied.
func TestParentDeadlineMessageIsNeverTakenForAnAction(t *testing.T) {
	r := newHandRig(t)
	plan := mustCompile(t, `
saga: deadline
timeout: 20m
steps:
  - id: first
    action: svc.first
  - id: both
    parallel:
      - steps: [{id: left, action: svc.left}]
      - steps: [{id: right, action: svc.right}]
`)
	ctx := context.Background()
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	r.deliver(forSaga("p")) // first runs; the fork launches both branches
	r.clock.Advance(21 * time.Minute)
	if res, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil || res.Sent != 1 {
		t.Fatalf("tick past the deadline: %+v %v, want the parent's timer sent", res, err)
	}
	ok, err := r.deliver(forSaga("p"))
	if !ok {
		t.Fatal("no message for the parent")
	}
	if got := r.actions.called("p/both"); len(got) > 0 {
		t.Errorf("the fork step was invoked as an action: %v", got)
	}
	if err != nil {
		t.Fatalf("the parent's deadline message failed: %v", err)
	}
	if st := r.get("p"); st.Version == 2 {
		t.Errorf("the parent's deadline changed nothing: %s at version %d", st.Status, st.Version)
	}
}

// The parent's side of an undo whose send failed: the write of
// EventUndone (one child undone, the next one's turn) lands and its send,
// the next child's KindUndo, fails; the child's ended message comes back,
// finds the parent moved on to the next child, and sends that undo again.
// Otherwise the parent waits compensating and the child stays succeeded.
func TestUndoneWhoseSendFailedIsSentAgain(t *testing.T) {
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
	r.q.failSend = func(msgs []durable.Message) bool {
		for _, m := range msgs {
			if m.Kind == durable.KindUndo && m.SagaID == "p.both.1.0" && !failed {
				failed = true // the undo of child 0, sent by the write that noted child 1 undone
				return true
			}
		}
		return false
	}
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if !failed {
		t.Fatal("child 0's undo was never sent")
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("after an undone whose send failed once: %s at version %d with %d messages queued, want compensated (child 0: %s)", st.Status, st.Version, len(r.q.msgs), r.get("p.both.1.0").Status)
	}
}
