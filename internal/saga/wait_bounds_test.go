package saga_test

import (
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A loop whose only work is a wait is valid (TestWaitValidation), but
// nothing bounds it: MaxVisits counts action visits only, and a saga
// without a timeout has no deadline. The loop below never leaves (its
// condition reads vars nothing sets), so the saga would wait, wake and
// write forever, billed each pass. A catch loop ends at MaxVisits with
// VisitLimitExceeded; a wait loop must end too.
func TestAWaitLoopIsBoundedLikeACatchLoop(t *testing.T) {
	t.Parallel()
	const src = "saga: s\nsteps:\n  - {id: poll, wait: {for: 1m}}\n  - {id: check, switch: [{if: \"vars.size() > 3\", next: done}, {default: poll}]}\n  - {id: done, succeed: {}}\n"
	const maxVisits = 5
	p, err := saga.Compile("w.yaml", []byte(src), saga.Options{MaxVisits: maxVisits})
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	now := t0
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: now, SagaID: "loop-1"}); err != nil {
		t.Fatal(err)
	}
	passes := 0
	for ; st.Status == durable.StatusWaiting && passes < 100*maxVisits; passes++ {
		now = st.WakeAt()
		if err := p.Advance(st, saga.Event{Kind: saga.EventTimer, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	if !st.Status.Final() && st.Status != durable.StatusCompensating {
		t.Fatalf("after %d timer passes (MaxVisits %d) the saga is still %s at version %d: a loop of waits runs without bound", passes, maxVisits, st.Status, st.Version)
	}
	if st.Failure == nil || st.Failure.Type != lang.ErrorTypeVisitLimit {
		t.Fatalf("ended %s with %+v; want the visit limit", st.Status, st.Failure)
	}
}

// A wait as long as the saga's timeout passes validation (only a longer
// one is refused, "the saga would compensate before it ends"), yet as the
// first step it is due exactly at the deadline, and the timer then fails
// it with DeadlineExceeded: a saga that validates and can never succeed.
// Either validation refuses it as it refuses a longer wait, or a timer
// due at the deadline goes on.
func TestAWaitAsLongAsTheTimeoutEitherFailsValidationOrEnds(t *testing.T) {
	t.Parallel()
	const src = "saga: s\ntimeout: 1h\nsteps:\n  - {id: w, wait: {for: 1h}}\n  - {id: done, succeed: {}}\n"
	p, err := saga.Compile("w.yaml", []byte(src), saga.Options{})
	if err != nil {
		return // refused, as a longer wait is: fine
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "w-1"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Advance(st, saga.Event{Kind: saga.EventTimer, Now: st.WakeAt()}); err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("a valid saga whose only step is a wait of its timeout ended %s (%+v): validation let through a saga that cannot succeed", st.Status, st.Failure)
	}
}

// The saga's timeout becomes a timer: a saga past its
// deadline compensates at the deadline, not at its next step. A running
// saga whose action fails five minutes before its deadline, with a
// 15-minute backoff (jittered), schedules the retry past the deadline
// and sets no timer (WakeAt is for waiting sagas only): it compensates
// when the retry's message comes, minutes late. Now the retry comes at
// the deadline plus the clock skew allowed (5 s, so that no worker whose
// clock is behind runs it), and finds the deadline passed.
func TestARetryBackoffPastTheDeadlineIsCutAtTheDeadline(t *testing.T) {
	t.Parallel()
	const src = "saga: s\ntimeout: 1h\nsteps:\n  - {id: first, action: a, compensate: {action: undo}}\n  - {id: flaky, action: b, retry: {attempts: 3, backoff: 15m, max_backoff: 15m}}\n"
	p := mustCompile(t, src)
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "r-1"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0.Add(time.Minute), Output: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(55 * time.Minute)
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: now, Err: saga.NewError("Flaky", "try again"), Rand: 0.5}); err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusRunning || len(st.Outbox) != 1 {
		t.Fatalf("after the failure: %s, outbox %+v; want a retry pending", st.Status, st.Outbox)
	}
	next := now.Add(st.Outbox[0].Delay)
	if wake := st.WakeAt(); next.After(st.Deadline.Add(5*time.Second)) && (wake.IsZero() || wake.After(st.Deadline)) {
		t.Fatalf("the retry comes at %s, %s past the deadline %s, and no timer is set at the deadline (WakeAt %s): the saga compensates late",
			next.Format(time.RFC3339), next.Sub(st.Deadline), st.Deadline.Format(time.RFC3339), wake)
	}
}
