package saga_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

const heldOrder = `saga: held-order
timeout: 2h
on_failure: hold
hold_for: 30m
steps:
  - id: reserve
    action: reserve
    out: r
    compensate: {action: release, with: {id: "${vars.r}"}}
  - id: charge
    action: charge
    retry: {attempts: 2, backoff: 1s}
    compensate: {action: refund}
  - id: check
    assert: {if: "false", message: never}
`

// heldRig drives a plan one event at a time.
type heldRig struct {
	t   *testing.T
	p   *saga.Plan
	st  *saga.State
	now time.Time
}

func newHeldRig(t *testing.T, src string) *heldRig {
	t.Helper()
	r := &heldRig{t: t, p: mustCompile(t, src), st: &saga.State{}, now: t0}
	r.step(saga.Event{Kind: saga.EventStart, SagaID: "h-1", Input: map[string]any{}})
	return r
}

func (r *heldRig) step(ev saga.Event) []durable.Message {
	r.t.Helper()
	if ev.Now.IsZero() {
		ev.Now = r.now
	}
	if err := r.p.Advance(r.st, ev); err != nil {
		r.t.Fatalf("%s: %v", ev.Kind, err)
	}
	if err := r.p.CheckState(r.st); err != nil {
		r.t.Fatalf("after %s: %v", ev.Kind, err)
	}
	return slices.Clone(r.st.Outbox)
}

// failCharge runs reserve, then fails charge on both of its attempts.
func (r *heldRig) failCharge() {
	r.t.Helper()
	r.step(saga.Event{Kind: saga.EventResult, Output: "r-1"})
	r.step(saga.Event{Kind: saga.EventResult, Err: errors.New("card service down")})
	r.step(saga.Event{Kind: saga.EventResult, Err: errors.New("card service down")})
}

func TestHoldParksAFailedActionInsteadOfCompensating(t *testing.T) {
	t.Parallel()
	r := newHeldRig(t, heldOrder)
	r.step(saga.Event{Kind: saga.EventResult, Output: "r-1"})
	r.step(saga.Event{Kind: saga.EventResult, Err: errors.New("card service down")})
	out := r.step(saga.Event{Kind: saga.EventResult, Err: errors.New("card service down")})
	if r.st.Status != durable.StatusHeld || r.st.Failure == nil || r.st.Failure.Step != "charge" || len(r.st.Stack) != 1 {
		t.Fatalf("after charge failed: %s failure %+v stack %d", r.st.Status, r.st.Failure, len(r.st.Stack))
	}
	// Its timer: hold_for, 30 minutes (before the deadline), past what a
	// queue's delay covers: the tick sends it (the record's WakeAt).
	if len(out) != 0 {
		t.Fatalf("outbox %+v", out)
	}
	if got, want := r.st.WakeAt(), t0.Add(30*time.Minute); !got.Equal(want) {
		t.Fatalf("wake at %s, want %s", got, want)
	}
	if r.st.Status.Final() {
		t.Fatal("held is not final: the saga waits for an operator or its hold's end")
	}
}

func TestRetryOfAHeldSagaRunsTheStepWithAFreshBudget(t *testing.T) {
	t.Parallel()
	r := newHeldRig(t, heldOrder)
	r.failCharge()
	key := func() string {
		c, err := r.p.Call(r.st, r.now)
		if err != nil {
			t.Fatal(err)
		}
		return c.IdempotencyKey
	}
	out := r.step(saga.Event{Kind: saga.EventRetry})
	cur, _ := r.st.Pending()
	if r.st.Status != durable.StatusRunning || r.st.Failure != nil || cur.Attempt != 3 || cur.Held || len(out) != 1 || out[0].Attempt != 3 || out[0].Delay != 0 {
		t.Fatalf("after retry: %s %+v cursor %+v outbox %+v", r.st.Status, r.st.Failure, cur, out)
	}
	k3 := key()
	// The fresh budget: two more attempts, the second after a backoff.
	out = r.step(saga.Event{Kind: saga.EventResult, Err: errors.New("still down")})
	if r.st.Status != durable.StatusRunning || len(out) != 1 || out[0].Attempt != 4 || out[0].Delay == 0 {
		t.Fatalf("after attempt 3: %s %+v", r.st.Status, out)
	}
	if k4 := key(); k4 != k3 {
		t.Fatalf("idempotency key changed across attempts of one visit: %s, %s", k3, k4)
	}
	r.step(saga.Event{Kind: saga.EventResult, Err: errors.New("still down")})
	if r.st.Status != durable.StatusHeld {
		t.Fatalf("after the fresh budget ran out: %s", r.st.Status)
	}
	// Retried again, the charge goes through; the assert after it is no
	// action: its failure compensates at once, the charge included.
	r.step(saga.Event{Kind: saga.EventRetry})
	out = r.step(saga.Event{Kind: saga.EventResult, Output: "p-1"})
	if r.st.Status != durable.StatusCompensating || r.st.Failure.Type != lang.ErrorTypeAssertion || len(r.st.Stack) != 2 {
		t.Fatalf("after the charge and the assert: %s %+v stack %d", r.st.Status, r.st.Failure, len(r.st.Stack))
	}
	if len(out) != 1 || out[0].Queue != durable.QueueCompensate || out[0].Step != "charge" {
		t.Fatalf("outbox %+v", out)
	}
}

func TestCompensateOfAHeldSagaUndoesTheCompletedSteps(t *testing.T) {
	t.Parallel()
	r := newHeldRig(t, heldOrder)
	r.failCharge()
	out := r.step(saga.Event{Kind: saga.EventCompensate})
	if r.st.Status != durable.StatusCompensating || r.st.Failure == nil || r.st.Failure.Step != "charge" {
		t.Fatalf("after compensate: %s %+v", r.st.Status, r.st.Failure)
	}
	if len(out) != 1 || out[0].Queue != durable.QueueCompensate || out[0].Step != "reserve" {
		t.Fatalf("outbox %+v", out)
	}
	for _, kind := range []saga.EventKind{saga.EventRetry, saga.EventCompensate} {
		if err := r.p.Advance(r.st, saga.Event{Kind: kind, Now: r.now}); !errors.Is(err, saga.ErrInvalidEvent) {
			t.Fatalf("%s of a compensating saga: %v", kind, err)
		}
	}
	r.step(saga.Event{Kind: saga.EventResult})
	if r.st.Status != durable.StatusCompensated {
		t.Fatalf("after release: %s", r.st.Status)
	}
	// The history reads back whole, the operator's compensate with it.
	h, err := r.st.HistoryEntries(r.p)
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	var causes []string
	for _, e := range h {
		causes = append(causes, e.Cause.String())
	}
	if !slices.Contains(causes, "compensate") || h[len(h)-1].Version != r.st.Version {
		t.Fatalf("history causes %v, last version %d of %d", causes, h[len(h)-1].Version, r.st.Version)
	}
}

func TestCancelOfAHeldSagaCompensatesAtOnce(t *testing.T) {
	t.Parallel()
	r := newHeldRig(t, heldOrder)
	r.failCharge()
	out := r.step(saga.Event{Kind: saga.EventCancel})
	if r.st.Status != durable.StatusCompensating || r.st.Failure.Type != lang.ErrorTypeCancelled || r.st.CancelRequested {
		t.Fatalf("after cancel: %s %+v requested %v", r.st.Status, r.st.Failure, r.st.CancelRequested)
	}
	if len(out) != 1 || out[0].Queue != durable.QueueCompensate || out[0].Step != "reserve" {
		t.Fatalf("outbox %+v", out)
	}
}

func TestHoldEndsInCompensationWhenHoldForPasses(t *testing.T) {
	t.Parallel()
	r := newHeldRig(t, heldOrder)
	r.failCharge()
	if err := r.p.Advance(r.st, saga.Event{Kind: saga.EventTimer, Now: t0.Add(29 * time.Minute)}); !errors.Is(err, saga.ErrInvalidEvent) {
		t.Fatalf("timer before hold_for: %v", err)
	}
	r.step(saga.Event{Kind: saga.EventTimer, Now: t0.Add(30 * time.Minute)})
	if r.st.Status != durable.StatusCompensating || r.st.Failure.Step != "charge" || r.st.Failure.Type == lang.ErrorTypeDeadline {
		t.Fatalf("after hold_for: %s %+v", r.st.Status, r.st.Failure)
	}
}

func TestTheDeadlineEndsAHoldAndRefusesARetry(t *testing.T) {
	t.Parallel()
	src := strings.Replace(heldOrder, "hold_for: 30m\n", "", 1)
	r := newHeldRig(t, src)
	r.failCharge()
	if got := r.st.WakeAt(); !got.Equal(r.st.Deadline) {
		t.Fatalf("a hold without hold_for wakes at %s, not the deadline %s", got, r.st.Deadline)
	}
	late := r.st.Deadline
	if err := r.p.Advance(r.st, saga.Event{Kind: saga.EventRetry, Now: late}); !errors.Is(err, saga.ErrInvalidEvent) {
		t.Fatalf("retry past the deadline: %v", err)
	}
	r.step(saga.Event{Kind: saga.EventTimer, Now: late})
	if r.st.Status != durable.StatusCompensating || r.st.Failure.Type != lang.ErrorTypeDeadline {
		t.Fatalf("after the deadline: %s %+v", r.st.Status, r.st.Failure)
	}
}

func TestHoldWithoutTimeoutOrHoldForWaitsOnNoTimer(t *testing.T) {
	t.Parallel()
	src := strings.Replace(strings.Replace(heldOrder, "hold_for: 30m\n", "", 1), "timeout: 2h\n", "", 1)
	r := newHeldRig(t, src)
	r.step(saga.Event{Kind: saga.EventResult, Output: "r-1"})
	r.step(saga.Event{Kind: saga.EventResult, Err: errors.New("down")})
	out := r.step(saga.Event{Kind: saga.EventResult, Err: errors.New("down")})
	if r.st.Status != durable.StatusHeld || len(out) != 0 || !r.st.WakeAt().IsZero() {
		t.Fatalf("held for ever: %s outbox %+v wake %s", r.st.Status, out, r.st.WakeAt())
	}
}

func TestWhatHoldsAndWhatCompensatesAtOnce(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src string
		status    durable.Status
	}{
		{"a fail step", "saga: f\non_failure: hold\nsteps:\n  - {id: a, action: a, compensate: {action: u}}\n  - {id: f, fail: {error: No, message: no}}\n", durable.StatusCompensating},
		{"an expression error", "saga: f\non_failure: hold\nsteps:\n  - {id: a, action: a, compensate: {action: u}}\n  - {id: s, set: {x: \"${1 / 0}\"}}\n", durable.StatusCompensating},
		{"a permanent action error", "saga: f\non_failure: hold\nsteps:\n  - {id: a, action: a, compensate: {action: u}}\n  - {id: b, action: b}\n", durable.StatusHeld},
		{"a caught failure", "saga: f\non_failure: hold\nsteps:\n  - {id: a, action: a, compensate: {action: u}}\n  - {id: b, action: b, catch: [{errors: ['*'], next: c}]}\n  - {id: c, fail: {error: Caught, message: caught}}\n", durable.StatusCompensating},
		{"without on_failure", "saga: f\nsteps:\n  - {id: a, action: a, compensate: {action: u}}\n  - {id: b, action: b}\n", durable.StatusCompensating},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newHeldRig(t, c.src)
			r.step(saga.Event{Kind: saga.EventResult})
			if _, ok := r.st.Pending(); ok && r.st.Status == durable.StatusRunning {
				r.step(saga.Event{Kind: saga.EventResult, Err: saga.Permanent(errors.New("declined"))})
			}
			if r.st.Status != c.status {
				t.Fatalf("status %s, want %s (failure %+v)", r.st.Status, c.status, r.st.Failure)
			}
		})
	}
}

func TestHoldStateSurvivesTheCodec(t *testing.T) {
	t.Parallel()
	r := newHeldRig(t, heldOrder)
	r.failCharge()
	r.step(saga.Event{Kind: saga.EventRetry})
	r.step(saga.Event{Kind: saga.EventResult, Err: errors.New("down")})
	r.step(saga.Event{Kind: saga.EventResult, Err: errors.New("down")})
	b, err := r.st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back saga.State
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	got, _ := back.Pending()
	want, _ := r.st.Pending()
	if got != want || !got.Held || got.Budget != 2 || got.Attempt != 4 {
		t.Fatalf("cursor %+v after the codec, want %+v", got, want)
	}
}

// A hold's timer is sent as a wait's is: in the hold's outbox when it is
// due within a queue's delay, by the tick (the record's WakeAt) when
// later, so that a long hold_for costs no message every 15 minutes.
func TestAHoldsTimerIsSentByTheTickWhenLaterThanAQueueDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		holdFor string
		delay   time.Duration // zero: no message
	}{
		{"10m", 10 * time.Minute},
		{"15m", durable.MaxDelay},
		{"16m", 0},
		{"90m", 0},
	} {
		r := newHeldRig(t, strings.Replace(heldOrder, "hold_for: 30m\n", "hold_for: "+tc.holdFor+"\n", 1))
		r.step(saga.Event{Kind: saga.EventResult, Output: "r-1"})
		r.step(saga.Event{Kind: saga.EventResult, Err: errors.New("down")})
		out := r.step(saga.Event{Kind: saga.EventResult, Err: errors.New("down")})
		if r.st.Status != durable.StatusHeld {
			t.Fatalf("hold_for %s: %s", tc.holdFor, r.st.Status)
		}
		switch {
		case tc.delay == 0 && len(out) != 0:
			t.Errorf("hold_for %s: outbox %+v, want none (the tick sends it)", tc.holdFor, out)
		case tc.delay != 0 && (len(out) != 1 || out[0].Step != "charge" || out[0].Delay != tc.delay):
			t.Errorf("hold_for %s: outbox %+v, want the timer delayed %s", tc.holdFor, out, tc.delay)
		}
	}
}

const heldTimeouts = `saga: held-timeouts
on_failure: hold
steps:
  - id: charge
    action: charge
    with: {n: "${saga.attempt}"}
    retry: {attempts: 1}
    compensate: {action: refund}
`

// A held step whose attempts ran into their deadline is found out, when
// the saga compensates, as the attempt after the last one that ran: a
// retry's attempts count, so that no attempt number is used twice and the
// action is asked with the input its last attempt had.
func TestFindingOutAHeldStepCountsTheRetriedAttempts(t *testing.T) {
	t.Parallel()
	r := newHeldRig(t, heldTimeouts)
	timeout := saga.NewError(lang.ErrorTypeTimeout, "no answer")
	r.step(saga.Event{Kind: saga.EventResult, Err: timeout})
	r.step(saga.Event{Kind: saga.EventRetry})
	r.step(saga.Event{Kind: saga.EventResult, Err: timeout})
	if r.st.Status != durable.StatusHeld || len(r.st.Stack) != 1 || !r.st.Stack[0].Unknown {
		t.Fatalf("after two attempts ran into their deadline: %s, stack %+v", r.st.Status, r.st.Stack)
	}
	r.step(saga.Event{Kind: saga.EventCompensate})
	c, err := r.p.Call(r.st, r.now)
	if err != nil {
		t.Fatal(err)
	}
	if c.Compensation || c.Attempt != 3 || c.Input.(map[string]any)["n"] != int64(2) {
		t.Fatalf("finding out: compensation %v, attempt %d, input %v; want the action's attempt 3 with attempt 2's input", c.Compensation, c.Attempt, c.Input)
	}
}

// A retried attempt that fails definitely (a permanent error: the service
// says, under the same key, that it did nothing) tells that the attempt
// before the hold, which ran into its deadline, took no effect either:
// the step leaves the stack, as it would without the hold, and is not
// asked again when the saga compensates.
func TestADefiniteFailureOfARetryClearsAHeldStepsUnknownOutcome(t *testing.T) {
	t.Parallel()
	r := newHeldRig(t, heldTimeouts)
	r.step(saga.Event{Kind: saga.EventResult, Err: saga.NewError(lang.ErrorTypeTimeout, "no answer")})
	r.step(saga.Event{Kind: saga.EventRetry})
	r.step(saga.Event{Kind: saga.EventResult, Err: saga.Permanent(errors.New("no such card"))})
	if r.st.Status != durable.StatusHeld || len(r.st.Stack) != 0 {
		t.Fatalf("after a definite failure: %s, stack %+v; want held with nothing to find out", r.st.Status, r.st.Stack)
	}
	r.step(saga.Event{Kind: saga.EventCompensate})
	if r.st.Status != durable.StatusCompensated {
		t.Fatalf("compensated: %s", r.st.Status)
	}
}

// A held saga keeps a signal for an await after its retry, as a running
// saga does; a completion of the held callback's token is refused.
func TestAHeldSagaKeepsSignalsForAfterItsRetry(t *testing.T) {
	t.Parallel()
	src := heldOrder[:strings.Index(heldOrder, "  - id: check")] + "  - id: approval\n    await: {signal: approved, timeout: 1h}\n    out: ok\n"
	r := newHeldRig(t, src)
	r.failCharge()
	ev := saga.Event{Now: r.now, Delivery: saga.Delivery{Signal: "approved", ID: "s-1", Payload: "yes"}}
	receipt, err := r.p.Receive(r.st, &ev)
	if err != nil || receipt != saga.ReceiptKept || len(r.st.Kept) != 1 || r.st.Status != durable.StatusHeld {
		t.Fatalf("signal to a held saga: %v %v, kept %d, %s", receipt, err, len(r.st.Kept), r.st.Status)
	}
	r.step(saga.Event{Kind: saga.EventRetry})
	r.step(saga.Event{Kind: saga.EventResult, Output: "p-1"})
	if r.st.Status != durable.StatusSucceeded || r.st.Vars["ok"] != "yes" {
		t.Fatalf("after the retry: %s, vars %v", r.st.Status, r.st.Vars)
	}
}
