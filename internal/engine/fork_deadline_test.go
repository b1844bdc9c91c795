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
	for _, m := range r.q.msgs {
		if m.SagaID == "p" && m.Kind == durable.KindStop {
			stops++
		}
	}
	if stops != 1 {
		t.Fatalf("the deadline's write sent %d stop messages, want 1 (queued: %+v)", stops, r.q.msgs)
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
	if len(r.q.msgs) != 0 {
		t.Errorf("messages left: %+v", r.q.msgs)
	}
}
