package saga_test

import (
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/lang"
	"github.com/lambdasaga/lambdasaga/saga"
)

// A loop whose only work is a wait is valid (TestWaitValidation), but
// nothing bounds it: MaxVisits counts action visits only, and a saga
// without a timeout has no deadline. The loop below never leaves (its
// condition reads vars nothing sets), so the saga would wait, wake and
// write forever, billed each pass. A catch loop ends at MaxVisits with
// VisitLimitExceeded; a wait loop must end too.
func TestAWaitLoopIsBoundedLikeACatchLoop(t *testing.T) {
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
