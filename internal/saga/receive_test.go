package saga_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

const expenseSaga = `saga: expense
timeout: 720h
steps:
  - id: file
    action: expenses.file
    out: claim
    compensate: {action: expenses.withdraw}
  - id: approval
    await: {signal: approved, timeout: 72h}
    out: decision
    catch: [{errors: [Timeout], next: escalate}]
  - id: pay
    action: payments.pay
    with: {by: "${vars.decision.by}"}
    next: done
  - id: escalate
    action: expenses.escalate
  - id: done
    succeed: {output: "${vars}"}
`

var secret = []byte("0123456789abcdef")

func startAt(t *testing.T, p *saga.Plan, id string) *saga.State {
	t.Helper()
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: id, Input: map[string]any{}, Secret: secret}); err != nil {
		t.Fatal(err)
	}
	return st
}

func signal(name string, payload any, id string) *saga.Event {
	return &saga.Event{Now: t0.Add(time.Hour), Delivery: saga.Delivery{Signal: name, Payload: payload, ID: id}}
}

// An await parks the saga on a timer at its timeout; the signal it awaits
// completes it, its payload in out, as one transition.
func TestAwaitTakesItsSignal(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, expenseSaga)
	st := startAt(t, p, "e-1")
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: map[string]any{"id": "c1"}}); err != nil {
		t.Fatal(err)
	}
	cur, _ := st.Pending()
	if st.Status != durable.StatusWaiting || !cur.Wait || !st.WakeAt().Equal(t0.Add(72*time.Hour)) {
		t.Fatalf("at the await: %s %+v wake %s", st.Status, cur, st.WakeAt())
	}
	v := st.Version
	r, err := p.Receive(st, signal("approved", map[string]any{"by": "ann"}, "s1"))
	if err != nil || r != saga.ReceiptApplied || st.Version != v+1 {
		t.Fatalf("receive: %s %v, version %d (was %d)", r, err, st.Version, v)
	}
	call, err := p.Call(st, t0)
	if err != nil || call.Step != "pay" || call.Input.(map[string]any)["by"] != "ann" || st.Status != durable.StatusRunning {
		t.Fatalf("after the signal: %s %+v %v", st.Status, call, err)
	}
	// The same signal again (the sender retried): a duplicate, nothing changes.
	r, err = p.Receive(st, signal("approved", map[string]any{"by": "bob"}, "s1"))
	if err != nil || r != saga.ReceiptDuplicate || st.Version != v+1 || len(st.Kept) != 0 {
		t.Fatalf("repeat: %s %v version %d kept %d", r, err, st.Version, len(st.Kept))
	}
}

// A signal that comes before its await is kept without a new version (the
// message of the action in flight stays valid), and the first await of its
// name takes it without pausing.
func TestEarlySignalIsKeptAndTaken(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, expenseSaga)
	st := startAt(t, p, "e-2")
	v, rc := st.Version, st.Received
	r, err := p.Receive(st, signal("approved", map[string]any{"by": "cy"}, "early"))
	if err != nil || r != saga.ReceiptKept || st.Version != v || st.Received != rc+1 || len(st.Kept) != 1 {
		t.Fatalf("early: %s %v version %d received %d kept %d", r, err, st.Version, st.Received, len(st.Kept))
	}
	// The kept signal survives the encoding.
	var back saga.State
	b, _ := st.MarshalBinary()
	if err := back.UnmarshalBinary(b); err != nil || len(back.Kept) != 1 || back.Received != st.Received || back.Kept[0].Signal != "approved" {
		t.Fatalf("decoded: %+v %v", back.Kept, err)
	}
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: map[string]any{"id": "c1"}}); err != nil {
		t.Fatal(err)
	}
	call, err := p.Call(st, t0)
	if err != nil || call.Step != "pay" || call.Input.(map[string]any)["by"] != "cy" || len(st.Kept) != 0 {
		t.Fatalf("after file: %s %+v %v kept %d", st.Status, call, err, len(st.Kept))
	}
}

// The await's timeout fails the step with Timeout, which catch routes.
func TestAwaitTimeoutIsCaught(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, expenseSaga)
	st := startAt(t, p, "e-3")
	_ = p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: map[string]any{}})
	if err := p.Advance(st, saga.Event{Kind: saga.EventTimer, Now: t0.Add(72 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if call, err := p.Call(st, t0); err != nil || call.Step != "escalate" {
		t.Fatalf("after the timeout: %s %+v %v", st.Status, call, err)
	}
	// The signal that comes after the timeout is kept (the saga runs on),
	// never applied to the await that timed out.
	if r, err := p.Receive(st, signal("approved", nil, "late")); err != nil || r != saga.ReceiptKept {
		t.Fatalf("late signal: %s %v", r, err)
	}
}

// Limits and refusals: a finished saga, a full keep, bad names and ids.
func TestReceiveRefusals(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, expenseSaga)
	st := startAt(t, p, "e-4")
	for i := range lang.MaxKeptSignals {
		if _, err := p.Receive(st, signal("approved", nil, "id"+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Receive(st, signal("approved", nil, "one-more")); !errors.Is(err, saga.ErrKeptFull) {
		t.Fatalf("past the limit: %v", err)
	}
	st2 := startAt(t, p, "e-5")
	big := strings.Repeat("x", 30<<10)
	if _, err := p.Receive(st2, signal("approved", big, "b1")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Receive(st2, signal("approved", big, "b2")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Receive(st2, signal("approved", big, "b3")); !errors.Is(err, saga.ErrKeptFull) || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("past the bytes: %v", err)
	}
	st.Status = durable.StatusCompensated
	if _, err := p.Receive(st, signal("approved", nil, "z")); !errors.Is(err, saga.ErrNotReceiving) {
		t.Fatalf("finished: %v", err)
	}
	for _, d := range []saga.Delivery{{Signal: "1bad"}, {Signal: "ok", ID: "sp ace"}, {Signal: "ok", Payload: make(chan int)}} {
		if err := saga.CheckDelivery(&d, 10); !errors.Is(err, saga.ErrBadDelivery) {
			t.Errorf("%+v: %v", d, err)
		}
	}
	if err := saga.CheckDelivery(&saga.Delivery{Signal: "ok"}, lang.MaxSignalBytes+1); !errors.Is(err, saga.ErrBadDelivery) {
		t.Errorf("too large: %v", err)
	}
}

const paySaga = `saga: pay
steps:
  - id: reserve
    action: stock.reserve
    compensate: {action: stock.release}
  - id: charge
    action: payments.charge_async
    callback: {timeout: 1h}
    retry: {attempts: 2, backoff: 1s}
    out: payment
    compensate: {action: payments.refund, with: {id: "${vars.payment.id}"}}
  - id: ship
    action: shipping.send
    with: {payment: "${vars.payment.status}"}
`

func toCharge(t *testing.T, p *saga.Plan, id string) *saga.State {
	t.Helper()
	st := startAt(t, p, id)
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0}); err != nil {
		t.Fatal(err)
	}
	return st
}

func complete(token string, out any, fail *saga.StepError) *saga.Event {
	return &saga.Event{Now: t0.Add(time.Minute), Delivery: saga.Delivery{Token: token, Payload: out, Err: fail}}
}

// A callback step's action gets a token; once it returns, the saga waits
// on the token, the step already on the compensation stack (the work it
// started may happen). Completing the token completes the step with its
// output; completing it again is a duplicate.
func TestCallbackCompletes(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, paySaga)
	st := toCharge(t, p, "p-1")
	call, err := p.Call(st, t0)
	if err != nil || call.CallbackToken == "" || call.CallbackTimeout != time.Hour {
		t.Fatalf("call: %+v %v", call, err)
	}
	if again, _ := p.Call(st, t0); again.CallbackToken != call.CallbackToken {
		t.Fatal("a redelivery of the attempt gets another token")
	}
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: map[string]any{"id": "ch_1", "status": "pending"}}); err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusWaiting || len(st.Stack) != 2 || st.Vars["payment"].(map[string]any)["status"] != "pending" {
		t.Fatalf("after the action: %s stack %d vars %v", st.Status, len(st.Stack), st.Vars)
	}
	r, err := p.Receive(st, complete(call.CallbackToken, map[string]any{"id": "ch_1", "status": "paid"}, nil))
	if err != nil || r != saga.ReceiptApplied {
		t.Fatalf("complete: %s %v", r, err)
	}
	next, err := p.Call(st, t0)
	if err != nil || next.Step != "ship" || next.Input.(map[string]any)["payment"] != "paid" || len(st.Stack) != 2 {
		t.Fatalf("after the callback: %+v %v stack %d", next, err, len(st.Stack))
	}
	if r, err := p.Receive(st, complete(call.CallbackToken, nil, nil)); err != nil || r != saga.ReceiptDuplicate {
		t.Fatalf("twice: %s %v", r, err)
	}
}

// Tokens are bound to the saga, step, visit and attempt: a forged token,
// another saga's, or an earlier attempt's is refused and changes nothing.
func TestCallbackTokensAreBound(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, paySaga)
	st := toCharge(t, p, "p-2")
	first, _ := p.Call(st, t0)
	_ = p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: map[string]any{"id": "ch"}})
	// Fail the first attempt's token: the step retries with a new token.
	if r, err := p.Receive(st, complete(first.CallbackToken, nil, &saga.StepError{Type: "Declined", Message: "card declined"})); err != nil || r != saga.ReceiptApplied {
		t.Fatalf("fail: %s %v", r, err)
	}
	second, _ := p.Call(st, t0)
	if second.Attempt != 2 || second.CallbackToken == first.CallbackToken || second.CallbackToken == "" {
		t.Fatalf("retry: %+v", second)
	}
	v := st.Version
	if _, err := p.Receive(st, complete(first.CallbackToken, nil, nil)); !errors.Is(err, saga.ErrTokenNotAwaited) && !errors.Is(err, saga.ErrNotReceiving) {
		// a repeat of the failure is a duplicate; a completion of the old attempt is refused
		if err != nil {
			t.Fatalf("old token: %v", err)
		}
	}
	other := toCharge(t, p, "p-3")
	if _, err := p.Receive(other, complete(first.CallbackToken, nil, nil)); !errors.Is(err, saga.ErrBadToken) {
		t.Fatalf("another saga's token: %v", err)
	}
	forged := first.CallbackToken[:len(first.CallbackToken)-2] + "AA"
	if _, err := p.Receive(st, complete(forged, nil, nil)); !errors.Is(err, saga.ErrBadToken) {
		t.Fatalf("forged: %v", err)
	}
	for _, bad := range []string{"", "lscb1_", "lscb1_!!!", "nope", strings.Repeat("A", 600)} {
		if _, err := saga.ParseCallbackToken(bad); !errors.Is(err, saga.ErrBadToken) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if st.Version != v {
		t.Fatalf("refusals changed the version: %d, want %d", st.Version, v)
	}
}

// A completion that comes while the action still runs is kept, and the
// action's result takes it at once; a timeout fails the attempt, and the
// last attempt's failure compensates the step too (its work may happen).
func TestCallbackEarlyAndTimeout(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, paySaga)
	st := toCharge(t, p, "p-4")
	call, _ := p.Call(st, t0)
	v := st.Version
	if r, err := p.Receive(st, complete(call.CallbackToken, map[string]any{"id": "ch", "status": "paid"}, nil)); err != nil || r != saga.ReceiptKept || st.Version != v {
		t.Fatalf("early: %s %v", r, err)
	}
	_ = p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: map[string]any{"id": "ch", "status": "pending"}})
	if next, err := p.Call(st, t0); err != nil || next.Step != "ship" || len(st.Kept) != 0 {
		t.Fatalf("after the action: %s %+v %v kept %d", st.Status, next, err, len(st.Kept))
	}

	st = toCharge(t, p, "p-5")
	for attempt := 1; attempt <= 2; attempt++ {
		_ = p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: map[string]any{"id": "ch"}})
		if err := p.Advance(st, saga.Event{Kind: saga.EventTimer, Now: st.WakeAt()}); err != nil {
			t.Fatal(err)
		}
	}
	if st.Status != durable.StatusCompensating || st.Failure == nil || st.Failure.Type != lang.ErrorTypeTimeout || len(st.Stack) != 2 {
		t.Fatalf("after two timeouts: %s %+v stack %d", st.Status, st.Failure, len(st.Stack))
	}
	if call, err := p.Call(st, t0); err != nil || call.Action != "payments.refund" || call.Input.(map[string]any)["id"] != "ch" {
		t.Fatalf("compensation: %+v %v", call, err)
	}
}

// A cancel compensates a saga waiting on a callback at once, its step
// included; the token's completion afterwards is refused clearly.
func TestCancelWhileCallbackWaits(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, paySaga)
	st := toCharge(t, p, "p-6")
	call, _ := p.Call(st, t0)
	_ = p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: map[string]any{"id": "ch"}})
	if err := p.Advance(st, saga.Event{Kind: saga.EventCancel, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if c, err := p.Call(st, t0); err != nil || c.Action != "payments.refund" {
		t.Fatalf("cancel: %s %+v %v", st.Status, c, err)
	}
	if _, err := p.Receive(st, complete(call.CallbackToken, nil, nil)); !errors.Is(err, saga.ErrNotReceiving) {
		t.Fatalf("after cancel: %v", err)
	}
}

// Validation of the new kinds.
func TestAwaitCallbackValidation(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		"saga: a\nsteps:\n  - {id: w, await: {timeout: 1h}}\n":                                                                                  "name the signal",
		"saga: a\nsteps:\n  - {id: w, await: {signal: 9x}}\n":                                                                                   "not a valid signal name",
		"saga: a\ntimeout: 1h\nsteps:\n  - {id: w, await: {signal: s, timeout: 2h}}\n":                                                          "not shorter than the saga's timeout",
		"saga: a\nsteps:\n  - {id: w, await: {signal: s}, compensate: {action: x}}\n":                                                           "only action steps have compensate",
		"saga: a\nsteps:\n  - {id: w, set: {a: 1}, callback: {timeout: 1h}}\n":                                                                  "only action steps have callback",
		"saga: a\ntimeout: 1h\nsteps:\n  - {id: w, action: a, callback: {timeout: 1h}}\n":                                                       "not shorter than the saga's timeout",
		"saga: a\nsteps:\n  - {id: w, action: a, callback: {timeout: 2y}}\n":                                                                    "callback.timeout",
		"saga: a\nsteps:\n  - {id: a, set: {x: 1}}\n  - {id: b, switch: [{if: 'vars.x > 1', next: c}, {default: a}]}\n  - {id: c, succeed: }\n": "put an action, a wait or an await",
		"saga: a\nsteps:\n  - {id: w, await: {signal: s}, out: d}\n  - {id: u, set: {x: '${vars.d}'}}\n":                                        "",
	} {
		_, err := saga.Compile("a.yaml", []byte(src), saga.Options{})
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", src, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}

// Any string given as a token is refused with ErrBadToken, or is the
// genuine token of the pending attempt; nothing panics, and a refusal
// changes nothing.
func FuzzCallbackToken(f *testing.F) {
	p := mustCompile(f, paySaga)
	base := startAt(&testing.T{}, p, "fz")
	_ = p.Advance(base, saga.Event{Kind: saga.EventResult, Now: t0})
	genuine, _ := p.Call(base, t0)
	f.Add(genuine.CallbackToken)
	f.Add(genuine.CallbackToken[:len(genuine.CallbackToken)-1])
	f.Add("lscb1_AAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		st := startAt(t, p, "fz")
		_ = p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0})
		before, _ := st.MarshalBinary()
		r, err := p.Receive(st, complete(token, map[string]any{"id": "x"}, nil))
		if token == genuine.CallbackToken {
			if err != nil || r != saga.ReceiptKept {
				t.Fatalf("the genuine token: %s %v", r, err)
			}
			return
		}
		if !errors.Is(err, saga.ErrBadToken) && !(token == "" && errors.Is(err, saga.ErrBadDelivery)) {
			t.Fatalf("token %q: %s %v, want ErrBadToken", token, r, err)
		}
		if after, _ := st.MarshalBinary(); string(after) != string(before) {
			t.Fatal("a refused token changed the saga")
		}
	})
}
