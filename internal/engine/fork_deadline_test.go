package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// The saga's deadline passes while its fork's children run (an action
// in flight) and wait (on a pause whose timer nobody has handled yet), and
// the parent's timer comes twenty minutes late, as under a backlogged
// queue. The write that fires it acts on the deadline: it records the
// saga's failure and stops the fork, and leaves the saga waiting, for its
// children must end before it compensates (docs/STATES.md). Once they
// have, the join compensates the saga with the deadline's failure; no
// child step starts past it.
func TestForkDeadlinePassesWhileChildrenWait(t *testing.T) {
	t.Parallel()
	r := newHandRig(t)
	plan := mustCompile(t, `
saga: late
timeout: 5m
steps:
  - id: first
    action: svc.first
    compensate: {action: svc.unfirst}
  - id: both
    parallel:
      - steps:
          - id: pause
            wait: {for: 4m}
          - id: after
            action: svc.after
      - steps:
          - id: slow
            action: svc.slow
            compensate: {action: svc.unslow}
`)
	ctx := context.Background()
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	r.deliver(forSaga("p")) // first runs; the fork launches both branches
	if st := r.get("p"); st.Status != durable.StatusWaiting || !st.WakeAt().Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("after the fork: %s, timer %s; want waiting, its timer the deadline", st.Status, st.WakeAt())
	}
	// No child's message is handled before the deadline: one child waits
	// on its pause, the other's action is in flight.
	r.clock.Advance(25 * time.Minute)
	if ok, err := r.deliver(func(m durable.Message) bool { return m.SagaID == "p" && m.Kind == "" }); !ok || err != nil {
		t.Fatalf("the parent's deadline timer: delivered %v, %v", ok, err)
	}
	st := r.get("p")
	if st.Status != durable.StatusWaiting || st.Failure == nil || st.Failure.Type != lang.ErrorTypeDeadline {
		t.Fatalf("the deadline's write leaves the saga %s (failure %v); want waiting on its children, failed with %s", st.Status, st.Failure, lang.ErrorTypeDeadline)
	}
	if cur, ok := st.Pending(); !ok || !cur.Fork || cur.Compensating {
		t.Fatalf("the deadline's write leaves the saga at %+v; want it waiting on the fork", cur)
	}
	stops := 0
	for _, m := range r.hand.msgs {
		if m.SagaID == "p" && m.Kind == durable.KindStop {
			stops++
		}
	}
	if stops != 1 {
		t.Fatalf("the deadline's write sent %d stop messages, want 1 (queued: %+v)", stops, r.hand.msgs)
	}
	// The stop first, then whatever the children's messages do.
	if ok, err := r.deliver(func(m durable.Message) bool { return m.Kind == durable.KindStop }); !ok || err != nil {
		t.Fatalf("the stop: delivered %v, %v", ok, err)
	}
	r.drain()
	st = r.get("p")
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != lang.ErrorTypeDeadline {
		t.Fatalf("after its children ended the saga is %s (failure %v), want compensated with %s", st.Status, st.Failure, lang.ErrorTypeDeadline)
	}
	if got := r.actions.called("p/first.compensate"); len(got) != 1 {
		t.Errorf("first undone %d times, want once", len(got))
	}
	var after, slow, unslow int
	for _, c := range r.actions.called("p.") {
		switch {
		case strings.HasSuffix(c, "/after"):
			after++
		case strings.HasSuffix(c, "/slow"):
			slow++
		case strings.HasSuffix(c, "/slow.compensate"):
			unslow++
		}
	}
	if after != 0 {
		t.Errorf("the step after the pause ran %d times past the deadline", after)
	}
	if slow > 0 && unslow != 1 {
		// The attempt in flight may have taken effect: it runs again with
		// its idempotency key, and is undone.
		t.Errorf("slow ran %d times and was undone %d times, want undone once", slow, unslow)
	}
	if len(r.hand.msgs) != 0 {
		t.Errorf("messages left: %+v", r.hand.msgs)
	}
}

// A parent waiting on its fork whose deadline is less than a queue's
// delay (15 minutes) after the fork transition gets a message for it,
// from the fork's outbox or from the tick. Without one the deadline never
// fires: the children are never stopped by it (docs/PROTOCOL.md, "Failure
// and cancel"), and the parent waits past it for as long as they run.
func TestParentDeadlineWithinAQueueDelayIsSent(t *testing.T) {
	t.Parallel()
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
	for _, m := range r.hand.msgs {
		if m.SagaID == "p" {
			return // the deadline's message, from the fork or the tick
		}
	}
	t.Errorf("past the parent's deadline, no message for it was ever sent (queued: %d messages, all for its children)", len(r.hand.msgs))
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
	t.Parallel()
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

// The saga's deadline passes while it waits on a fork whose branch awaits
// a signal: the tick sends the parent's timer message (its WakeAt is the
// deadline), and Handle takes it as the deadline firing, though the
// cursor is a fork's, not a wait's. The saga compensates with
// SagaDeadlineExceeded; the message must not be an error on every
// delivery and end in the dead-letter queue.
func TestDeadlineOfAParentWaitingOnAForkCompensates(t *testing.T) {
	t.Parallel()
	src := strings.Replace(waitingBranchYAML, "saga: slow\n", "saga: slow\ntimeout: 2h\n", 1)
	src = strings.Replace(src, "timeout: 72h", "timeout: 119m", 1)
	r := newForkRig(t, src, nil)
	ctx := context.Background()
	r.start("p", nil)
	r.drain()
	r.clock.Advance(2*time.Hour + time.Minute)
	if _, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil {
		t.Fatal(err)
	}
	// Handle the parent's own timer first (the queue gives no order).
	ds, err := r.q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range ds {
		m, err := durable.DecodeMessage(d.Body)
		if err != nil {
			t.Fatal(err)
		}
		if m.SagaID != "p" {
			continue
		}
		found = true
		if out, err := r.coord.Handle(ctx, d.Body); err != nil {
			t.Errorf("the parent's deadline message: %v (outcome %q); want it handled as the deadline firing", err, out)
		}
	}
	if !found {
		t.Fatalf("the tick sent no message for the parent (%d messages)", len(ds))
	}
	r.clock.Advance(time.Minute) // the rest become visible again
	r.drain()
	st := r.get("p")
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != lang.ErrorTypeDeadline {
		t.Fatalf("parent %s %+v; want compensated, deadline", st.Status, st.Failure)
	}
}

// A failed fork with a catch undoes its children before the catch takes
// the failure, the saga "running" meanwhile. Its undo parks on a child,
// and an operator resumes it after the saga's deadline. The deadline goes
// past every catch, so the saga compensates from the resume on: the
// resume must not set it running again for the catch to take the failure.
func TestAResumePastTheDeadlineOfACaughtForksUndoCompensates(t *testing.T) {
	t.Parallel()
	src := strings.Replace(catchForkYAML, "saga: caught\n", "saga: caught\ntimeout: 10m\n", 1)
	r := newForkRig(t, src, nil)
	r.fail["b.one(b1)"] = true
	r.fail["a.undo(a1)"] = true
	r.start("p", nil)
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("setup: parent %s, want parked on branch 0's undo", st.Status)
	}
	r.fail["a.undo(a1)"] = false
	r.clock.Advance(time.Hour)
	st, err := r.coord.Resume(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status == durable.StatusRunning {
		t.Errorf("the resume past the deadline set the saga running")
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensated || st.Output == "sorry" {
		t.Fatalf("parent %s, output %v: want compensated (its deadline passed)", st.Status, st.Output)
	}
}
