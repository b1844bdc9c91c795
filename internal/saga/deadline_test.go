package saga_test

import (
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Past the saga's deadline, a pending attempt whose message may have
// been handled before it (and taken effect, its write lost) runs again to
// learn its outcome; only a retry sent to come after the deadline does
// not run. A callback action that returns past the deadline does not
// wait on its token: the saga compensates it at once.
func TestDeadlineRunsAttemptsThatMayHaveRun(t *testing.T) {
	t.Parallel()
	const src = "saga: s\ntimeout: 1h\nsteps:\n  - {id: a, action: x, retry: {attempts: 3, backoff: 15m, max_backoff: 15m}, callback: {timeout: 10m}, compensate: {action: undo}}\n"
	p := mustCompile(t, src)
	st := startAt(t, p, "d-1")
	past := st.Deadline.Add(time.Minute)
	if st.DeadlinePassed(past) {
		t.Fatal("the first attempt, sent before the deadline, would not run again past it")
	}
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0.Add(50 * time.Minute), Err: saga.NewError("Flaky", "again"), Rand: 0.5}); err != nil {
		t.Fatal(err)
	}
	if m := st.Outbox[0]; t0.Add(50*time.Minute).Add(m.Delay).Before(st.Deadline.Add(5*time.Second)) || !st.DeadlinePassed(past) {
		t.Fatalf("the retry's message %+v comes before the deadline plus the clock skew, or would run past it", m)
	}
	// The callback action returns past the deadline: compensated at once.
	st = startAt(t, p, "d-2")
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: past, Output: map[string]any{"id": "w"}}); err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusCompensating || st.Failure == nil || st.Failure.Type != "SagaDeadlineExceeded" || len(st.Stack) != 1 {
		t.Fatalf("a callback action returning past the deadline: %s %+v, stack %d", st.Status, st.Failure, len(st.Stack))
	}
}

// A callback failed past the deadline (before the deadline's timer fired)
// starts no retry: the step fails, and the saga compensates at once.
func TestCallbackFailedPastTheDeadlineIsNotRetried(t *testing.T) {
	t.Parallel()
	const src = "saga: s\ntimeout: 1h\nsteps:\n  - {id: a, action: x, retry: {attempts: 3}, callback: {timeout: 10m}, compensate: {action: undo}}\n"
	p := mustCompile(t, src)
	st := startAt(t, p, "d-3")
	call, _ := p.Call(st, t0)
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0.Add(55 * time.Minute), Output: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	ev := complete(call.CallbackToken, nil, &saga.StepError{Type: "Declined", Message: "no"})
	ev.Now = st.Deadline.Add(time.Second)
	if r, err := p.Receive(st, ev); err != nil || r != saga.ReceiptApplied {
		t.Fatalf("fail: %s %v", r, err)
	}
	if st.Status != durable.StatusCompensating {
		t.Fatalf("after a failure past the deadline: %s %+v, outbox %+v", st.Status, st.Failure, st.Outbox)
	}
}
