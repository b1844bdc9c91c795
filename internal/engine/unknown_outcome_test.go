package engine_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// An attempt that runs into its deadline (a Timeout) may have taken
// effect. Whenever the saga then compensates without an attempt that
// answered (a cancel, the step's last attempt, the saga's deadline, a
// catch that moved on), compensating first finds it out: the action runs
// again under the same idempotency key, and the service answers what it
// did. A success is compensated with the rest; a definite failure took no
// effect; no answer parks the saga for an operator. The tests below also
// pin what counts as an answer, the input and token the call that finds
// out carries, its time, catch loops and large outputs; forks are in
// unknown_outcome_fork_test.go.

const unknownSaga = `
saga: unknown
timeout: {{TIMEOUT}}
steps:
  - id: reserve
    action: inv.reserve
    compensate: {action: inv.release}
  - id: charge
    action: pay.charge
    out: payment
    retry: {attempts: {{ATTEMPTS}}, backoff: 1m, max_backoff: 1m, permanent: [Declined]}
    {{CATCH}}
    compensate: {action: pay.refund, with: {id: "${vars.payment.id}"}, retry: {attempts: 2, backoff: 1s}}
  - id: ship
    action: ship.send
    compensate: {action: ship.cancel}
  - id: note
    action: crm.note
  - id: fail
    action: ship.fail
`

func unknownDef(timeout, attempts, catch string) string {
	return strings.NewReplacer("{{TIMEOUT}}", timeout, "{{ATTEMPTS}}", attempts, "{{CATCH}}", catch).Replace(unknownSaga)
}

// chargeService is pay.charge as a service with idempotency keys: the
// first call under a key takes effect and answers as script says (by call
// number, 1-based; past the script it answers what it did); a later call
// under a key that took effect answers the success.
type chargeService struct {
	script  []string // "ok", "timeout" (after the effect), "timeout-before", "503", "declined"
	calls   []saga.Call
	charged map[string]bool
	refunds []any // the inputs pay.refund got
}

func (c *chargeService) act(ctx context.Context, call saga.Call) (any, error) {
	switch {
	case call.Step == "fail":
		return nil, saga.Permanent(saga.NewError("Rejected", "shipping refused"))
	case call.Step == "charge" && call.Compensation:
		c.refunds = append(c.refunds, call.Input)
		return map[string]any{}, nil
	case call.Step != "charge":
		return map[string]any{"id": call.Step}, nil
	}
	c.calls = append(c.calls, call)
	what := "ok"
	if n := len(c.calls); n <= len(c.script) {
		what = c.script[n-1]
	}
	switch what {
	case "timeout":
		c.charged[call.IdempotencyKey] = true
		return nil, saga.NewError(lang.ErrorTypeTimeout, "charge ran into its deadline after charging")
	case "timeout-before":
		return nil, saga.NewError(lang.ErrorTypeTimeout, "charge ran into its deadline before charging")
	case "503":
		return nil, errors.New("payments: service unavailable")
	case "declined":
		if c.charged[call.IdempotencyKey] {
			return map[string]any{"id": "ch-1"}, nil
		}
		return nil, saga.Permanent(saga.NewError("Declined", "card declined"))
	}
	c.charged[call.IdempotencyKey] = true
	return map[string]any{"id": "ch-1"}, nil
}

func (c *chargeService) sameKey(t *testing.T, n int) {
	t.Helper()
	if len(c.calls) != n {
		t.Fatalf("charge called %d times, want %d", len(c.calls), n)
	}
	for i, call := range c.calls {
		if call.IdempotencyKey != c.calls[0].IdempotencyKey || call.Attempt != i+1 || call.Compensation {
			t.Fatalf("call %d: key %q attempt %d compensation %v; want key %q attempt %d", i+1, call.IdempotencyKey, call.Attempt, call.Compensation, c.calls[0].IdempotencyKey, i+1)
		}
	}
}

func TestUnknownOutcomeIsFoundOutWhenTheSagaCompensates(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, timeout, attempts, catch string
		script                         []string
		cancel                         string // "during" the first call, "waiting" after it
		calls                          int
		wantCalls                      string // the calls that returned success, in order
		refund                         bool   // refunded with the charge's id
		failType                       string
	}{
		{name: "a cancel while the attempt runs", timeout: "1h", attempts: "3", script: []string{"timeout"}, cancel: "during",
			calls: 2, wantCalls: "reserve charge charge.compensate reserve.compensate", refund: true, failType: lang.ErrorTypeCancelled},
		{name: "a cancel while its retry waits", timeout: "1h", attempts: "3", script: []string{"timeout"}, cancel: "waiting",
			calls: 2, wantCalls: "reserve charge charge.compensate reserve.compensate", refund: true, failType: lang.ErrorTypeCancelled},
		{name: "the last attempt", timeout: "1h", attempts: "2", script: []string{"503", "timeout"},
			calls: 3, wantCalls: "reserve charge charge.compensate reserve.compensate", refund: true, failType: lang.ErrorTypeTimeout},
		{name: "a transient failure after it on the last attempt", timeout: "1h", attempts: "2", script: []string{"timeout", "503"},
			calls: 3, wantCalls: "reserve charge charge.compensate reserve.compensate", refund: true, failType: "Error"},
		{name: "the saga's deadline while its retry waits", timeout: "30s", attempts: "3", script: []string{"timeout"},
			calls: 2, wantCalls: "reserve charge charge.compensate reserve.compensate", refund: true, failType: lang.ErrorTypeDeadline},
		{name: "a catch that moved on", timeout: "1h", attempts: "1", catch: "catch: [{errors: [Timeout], next: note}]", script: []string{"timeout"},
			calls: 2, wantCalls: "reserve note charge charge.compensate reserve.compensate", refund: true, failType: "Rejected"},
		{name: "an answer that it took no effect", timeout: "1h", attempts: "1", script: []string{"timeout-before", "declined"},
			calls: 2, wantCalls: "reserve reserve.compensate", failType: lang.ErrorTypeTimeout},
		{name: "a definite failure last", timeout: "1h", attempts: "2", script: []string{"timeout-before", "declined"},
			calls: 2, wantCalls: "reserve reserve.compensate", failType: "Declined"},
		{name: "a transient failure, then the answer that it took effect", timeout: "1h", attempts: "2", script: []string{"timeout", "503", "503", "declined"},
			calls: 4, wantCalls: "reserve charge charge.compensate reserve.compensate", refund: true, failType: "Error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := &chargeService{script: tt.script, charged: map[string]bool{}}
			var e *rig
			e = newEdgeRig(t, unknownDef(tt.timeout, tt.attempts, tt.catch), func(ctx context.Context, c saga.Call) (any, error) {
				if tt.cancel == "during" && c.Step == "charge" && len(svc.calls) == 0 {
					if _, err := e.coord.Cancel(context.Background(), c.SagaID); err != nil {
						return nil, err
					}
				}
				return svc.act(ctx, c)
			})
			e.start("s-1", nil)
			if tt.cancel == "waiting" {
				for len(svc.calls) == 0 {
					d, ok := e.receive()
					if !ok {
						t.Fatal("no message before charge ran")
					}
					if _, err := e.coord.Handle(context.Background(), d.Body); err != nil {
						t.Fatal(err)
					}
				}
				if st := e.get("s-1"); st.Status != durable.StatusRunning {
					t.Fatalf("after the first attempt: %s", st.Status)
				}
				if _, err := e.coord.Cancel(context.Background(), "s-1"); err != nil {
					t.Fatal(err)
				}
			}
			e.drain()
			svc.sameKey(t, tt.calls)
			st := e.get("s-1")
			if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != tt.failType {
				t.Fatalf("status %s, failure %+v; want compensated after %s", st.Status, st.Failure, tt.failType)
			}
			if got := e.succeeded(); got != tt.wantCalls {
				t.Fatalf("calls %q, want %q", got, tt.wantCalls)
			}
			if tt.refund && (len(svc.refunds) != 1 || svc.refunds[0].(map[string]any)["id"] != "ch-1") {
				t.Fatalf("refunds %v, want one of ch-1", svc.refunds)
			}
		})
	}
}

// A step without a compensation has nothing to undo: its unknown attempt
// is not asked again.
func TestUnknownOutcomeOfAStepWithoutCompensationIsNotAskedAgain(t *testing.T) {
	t.Parallel()
	calls := 0
	e := newEdgeRig(t, `
saga: plain
steps:
  - id: reserve
    action: inv.reserve
    compensate: {action: inv.release}
  - id: notify
    action: crm.notify
    retry: {attempts: 1}
`, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "notify" {
			calls++
			return nil, saga.NewError(lang.ErrorTypeTimeout, "slow")
		}
		return map[string]any{}, nil
	})
	e.start("s-1", nil)
	e.drain()
	if calls != 1 {
		t.Fatalf("notify called %d times, want 1", calls)
	}
	e.ended(t, "s-1", durable.StatusCompensated, lang.ErrorTypeTimeout, "notify", "reserve reserve.compensate")
}

// When the service gives no answer to the calls that find out (they run
// into their deadline too, as often as the compensation's retry allows),
// the saga parks as compensation_failed, naming the step and its key;
// resume asks again, and skip goes on without it.
func TestUnknownOutcomeWithNoAnswerParksForAnOperator(t *testing.T) {
	t.Parallel()
	for _, skip := range []bool{false, true} {
		name := "resume asks again"
		if skip {
			name = "skip goes on without it"
		}
		t.Run(name, func(t *testing.T) {
			svc := &chargeService{script: []string{"timeout", "timeout", "timeout"}, charged: map[string]bool{}}
			e := newEdgeRig(t, unknownDef("1h", "1", ""), svc.act)
			e.start("s-1", nil)
			e.drain()
			st := e.get("s-1")
			if st.Status != durable.StatusCompensationFailed || st.CompensationError == nil {
				t.Fatalf("status %s, compensation error %+v; want parked", st.Status, st.CompensationError)
			}
			key := svc.calls[0].IdempotencyKey
			if msg := st.CompensationError.Message; st.CompensationError.Step != "charge" || !strings.Contains(msg, "unknown") || !strings.Contains(msg, key) {
				t.Fatalf("compensation error %+v: want the step, \"unknown\" and the key %s", st.CompensationError, key)
			}
			svc.sameKey(t, 3) // the attempt, then the compensation's 2 attempts
			var err error
			if skip {
				_, err = e.coord.SkipCompensation(context.Background(), "s-1")
			} else {
				_, err = e.coord.Resume(context.Background(), "s-1")
			}
			if err != nil {
				t.Fatal(err)
			}
			e.drain()
			want, calls := "reserve charge charge.compensate reserve.compensate", 4
			if skip {
				want, calls = "reserve reserve.compensate", 3
			}
			svc.sameKey(t, calls)
			e.ended(t, "s-1", durable.StatusCompensated, lang.ErrorTypeTimeout, "charge", want)
		})
	}
}

// A success that finds the outcome out counts as one even when its output
// is one state cannot hold: the step took effect. Its compensation reads
// that output, so the saga parks saying to undo it by hand, rather than
// asking the service again and again.
func TestUnknownOutcomeFoundOutWithAnOutputStateCannotHold(t *testing.T) {
	t.Parallel()
	calls := 0
	e := newEdgeRig(t, unknownDef("1h", "1", ""), func(ctx context.Context, c saga.Call) (any, error) {
		switch {
		case c.Step == "charge" && !c.Compensation:
			calls++
			if calls == 1 {
				return nil, saga.NewError(lang.ErrorTypeTimeout, "charge ran into its deadline after charging")
			}
			return make(chan int), nil
		case c.Step == "fail":
			return nil, saga.Permanent(saga.NewError("Rejected", "no"))
		}
		return map[string]any{"id": c.Step}, nil
	})
	e.start("s-1", nil)
	e.drain()
	st := e.get("s-1")
	if calls != 2 {
		t.Fatalf("charge called %d times, want 2 (the attempt, and the one that found it out)", calls)
	}
	if st.Status != durable.StatusCompensationFailed || st.CompensationError == nil || st.CompensationError.Step != "charge" || !strings.Contains(st.CompensationError.Message, "undo it by hand") {
		t.Fatalf("status %s, compensation error %+v; want parked on charge's refund, saying to undo it by hand", st.Status, st.CompensationError)
	}
}

// keyedService is an action with idempotency keys: a call that "charges"
// records its key as applied; every later call under an applied key
// answers success, unless the script says otherwise for that call.
type keyedService struct {
	script  []string // per call of the action under test: "timeout" (after the effect), "timeout-before", "ok"
	calls   []saga.Call
	applied map[string]bool
	undone  map[string]bool // keys whose compensation ran
}

func newKeyedService(script ...string) *keyedService {
	return &keyedService{script: script, applied: map[string]bool{}, undone: map[string]bool{}}
}

func (k *keyedService) call(c saga.Call) (any, error) {
	k.calls = append(k.calls, c)
	what := "ok"
	if n := len(k.calls); n <= len(k.script) {
		what = k.script[n-1]
	}
	switch what {
	case "timeout":
		k.applied[c.IdempotencyKey] = true
		return nil, saga.NewError(lang.ErrorTypeTimeout, "ran into its deadline after its effect")
	case "timeout-before":
		return nil, saga.NewError(lang.ErrorTypeTimeout, "ran into its deadline")
	}
	k.applied[c.IdempotencyKey] = true
	return map[string]any{"id": "ch-1"}, nil
}

// undo records the compensation call c: it undoes its step's key.
func (k *keyedService) undo(c saga.Call) {
	k.undone[strings.Replace(c.IdempotencyKey, "/"+c.Step+".compensate/", "/"+c.Step+"/", 1)] = true
}

// leftUndone lists the keys whose effect was applied and never undone.
func (k *keyedService) leftUndone() []string {
	var out []string
	for key := range k.applied {
		if !k.undone[key] {
			out = append(out, key)
		}
	}
	return out
}

// A step whose retry policy lists Timeout as permanent (do not retry a
// slow charge) times out after charging. The call that finds it out runs
// into its deadline too: that answers nothing of what the first attempt
// did, listed or not, so it is asked again and the saga parks; it never
// ends compensated with the charge in place.
func TestUnknownOutcomeAskedAgainTimingOutIsNoAnswerEvenWhenTimeoutIsPermanent(t *testing.T) {
	t.Parallel()
	src := `
saga: permtimeout
steps:
  - id: reserve
    action: inv.reserve
    compensate: {action: inv.release}
  - id: charge
    action: pay.charge
    retry: {attempts: 3, backoff: 1s, permanent: [Timeout]}
    compensate: {action: pay.refund, retry: {attempts: 2, backoff: 1s}}
`
	svc := newKeyedService("timeout", "timeout-before", "timeout-before")
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step != "charge" {
			return map[string]any{}, nil
		}
		if c.Compensation {
			svc.undo(c)
			return map[string]any{}, nil
		}
		return svc.call(c)
	})
	e.start("s-1", nil)
	e.drain()
	st := e.get("s-1")
	if st.Status == durable.StatusCompensated {
		if left := svc.leftUndone(); len(left) > 0 {
			t.Fatalf("saga compensated with the charge under %v applied and never refunded (charge called %d times); want it asked again or parked, as for any Timeout", left, len(svc.calls))
		}
	}
	if st.Status != durable.StatusCompensationFailed {
		t.Fatalf("status %s, want compensation_failed (no answer to the calls that find out)", st.Status)
	}
}

// The call that finds out carries the input the attempts had, kept when
// the step went on the stack: after a catch moved on, a later step changed
// what the with reads (its value, or its shape), and the service is still
// asked the same under the same key (a service that checks a repeated
// key's parameters would refuse another).
func TestUnknownOutcomeIsAskedWithTheInputOfTheAttempt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, later string }{
		{"a value changed", "{order: {id: 'o-2'}}"},
		{"a value changed shape", "{order: 'gone'}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := `
saga: withvars
steps:
  - id: init
    set: {order: {id: 'o-1'}}
  - id: charge
    action: pay.charge
    with: {order: "${vars.order.id}"}
    retry: {attempts: 1}
    catch: [{errors: [Timeout], next: later}]
    compensate: {action: pay.refund}
  - id: later
    set: ` + tt.later + `
  - id: fail
    action: x.fail
`
			svc := newKeyedService("timeout")
			var inputs []any
			e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
				switch {
				case c.Step == "fail":
					return nil, saga.Permanent(saga.NewError("Rejected", "no"))
				case c.Step == "charge" && c.Compensation:
					svc.undo(c)
				case c.Step == "charge":
					inputs = append(inputs, c.Input)
					return svc.call(c)
				}
				return map[string]any{}, nil
			})
			e.start("s-1", nil)
			e.drain()
			st := e.get("s-1")
			if left := svc.leftUndone(); st.Status == durable.StatusCompensated && len(left) > 0 {
				t.Fatalf("saga compensated with the charge under %v applied and never refunded; history: %s", left, historyOf(t, e, st))
			}
			if len(inputs) != 2 {
				t.Fatalf("charge called %d times, want 2 (the attempt and the call that finds it out)", len(inputs))
			}
			if !equalValues(inputs[0], inputs[1]) {
				t.Fatalf("the call that finds out had input %v under the same key; the attempt had %v", inputs[1], inputs[0])
			}
		})
	}
}

// A callback step's action runs into its deadline on its last attempt;
// the saga compensates and finds it out: the call carries the last
// attempt's callback token and the callback's timeout.
func TestUnknownOutcomeOfACallbackStepIsAskedWithAToken(t *testing.T) {
	t.Parallel()
	src := `
saga: cb
steps:
  - id: ship
    action: ship.start
    retry: {attempts: 1}
    callback: {timeout: 1h}
    compensate: {action: ship.cancel}
  - id: fail
    action: x.fail
`
	var calls []saga.Call
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		switch {
		case c.Step == "ship" && !c.Compensation:
			calls = append(calls, c)
			if len(calls) == 1 {
				return nil, saga.NewError(lang.ErrorTypeTimeout, "slow")
			}
		case c.Step == "fail":
			return nil, saga.Permanent(saga.NewError("Rejected", "no"))
		}
		return map[string]any{}, nil
	})
	e.start("s-1", nil)
	e.drain()
	if len(calls) != 2 {
		t.Fatalf("ship.start called %d times, want 2", len(calls))
	}
	if calls[0].CallbackToken == "" {
		t.Fatal("the forward attempt had no token")
	}
	if c := calls[1]; c.CallbackToken == "" {
		t.Fatalf("the call that finds out has callback timeout %s but token %q", c.CallbackTimeout, c.CallbackToken)
	}
}

// The call that finds out runs the step's action under the step's
// timeout, and the coordinator measures the time it needs by it: in a
// batch with little of the invocation left, it is handed back to a fresh
// invocation, as the forward attempt is, rather than cut short.
func TestUnknownOutcomeCallThatNoLongerFitsIsHandedBack(t *testing.T) {
	t.Parallel()
	src := `
saga: t
steps:
  - id: a
    action: x.a
    timeout: 1s
    retry: {attempts: 1}
    compensate: {action: x.undo}
`
	ran := 0
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Compensation {
			return nil, nil
		}
		ran++
		if ran == 1 {
			return nil, saga.NewError(lang.ErrorTypeTimeout, "slow")
		}
		return nil, nil
	})
	e.start("s-1", nil)
	d, _ := e.receive()
	if _, err := e.coord.Handle(context.Background(), d.Body); err != nil {
		t.Fatal(err)
	}
	st := e.get("s-1")
	if cur, ok := st.Pending(); !ok || !cur.Compensating || !cur.Unknown {
		t.Fatalf("after the timeout: status %s, cursor %+v; want the call that finds out pending", st.Status, cur)
	}
	d, _ = e.receive()
	// As in TestStepTimeoutThatNoLongerFitsIsHandedBack: 2.5 s left of
	// an invocation that had 10 s; the 1 s step timeout and the 2 s reserve
	// do not fit.
	ctx, cancel := context.WithTimeout(engine.WithInvocationBudget(context.Background(), 10*time.Second), 2500*time.Millisecond)
	defer cancel()
	if _, err := e.coord.Handle(ctx, d.Body); !errors.Is(err, engine.ErrNoTime) || ran != 1 {
		t.Fatalf("err %v, action ran %d times: want the call that finds out handed back unrun, as the forward attempt is", err, ran)
	}
}

// The with of a step reads attempt (one endpoint per attempt). Both
// attempts run into their deadline, the first after its effect. The call
// that finds out asks as the last attempt did (its with sees attempt 2,
// never one past retry.attempts), and an expression error, which the
// service never saw, is never taken for its answer.
func TestUnknownOutcomeIsNotDroppedWhenTheCallThatFindsOutCannotBeBuilt(t *testing.T) {
	t.Parallel()
	src := `
saga: attemptwith
steps:
  - id: charge
    action: pay.charge
    with: {endpoint: "${['eu', 'us'][saga.attempt - 1]}"}
    retry: {attempts: 2, backoff: 1s}
    compensate: {action: pay.refund, retry: {attempts: 2, backoff: 1s}}
`
	svc := newKeyedService("timeout", "timeout-before")
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Compensation {
			svc.undo(c)
			return map[string]any{}, nil
		}
		return svc.call(c)
	})
	e.start("s-1", nil)
	e.drain()
	st := e.get("s-1")
	if left := svc.leftUndone(); st.Status == durable.StatusCompensated && len(left) > 0 {
		t.Fatalf("saga compensated (failure %v) with the charge under %v applied and never refunded; history: %s", st.Failure, left, historyOf(t, e, st))
	}
}

// The same on the forward path: the first attempt runs into its deadline
// after its effect, the second cannot be built (its with reads attempt):
// the expression error answers nothing, so the first stays unknown and is
// found out when the saga compensates.
func TestUnknownOutcomeIsNotForgottenWhenTheNextAttemptCannotBeBuilt(t *testing.T) {
	t.Parallel()
	src := `
saga: attemptwith2
steps:
  - id: charge
    action: pay.charge
    with: {endpoint: "${['eu'][saga.attempt - 1]}"}
    retry: {attempts: 2, backoff: 1s}
    compensate: {action: pay.refund}
`
	svc := newKeyedService("timeout")
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Compensation {
			svc.undo(c)
			return map[string]any{}, nil
		}
		return svc.call(c)
	})
	e.start("s-1", nil)
	e.drain()
	st := e.get("s-1")
	if left := svc.leftUndone(); st.Status == durable.StatusCompensated && len(left) > 0 {
		t.Fatalf("saga compensated (failure %v) with the charge under %v applied and never refunded; history: %s", st.Failure, left, historyOf(t, e, st))
	}
}

func historyOf(t *testing.T, e *rig, st *saga.State) string {
	t.Helper()
	hs, err := st.HistoryEntries(e.plan)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, h := range hs {
		name := h.Step
		if h.Compensation {
			name += ".compensate"
		}
		b.WriteString(name + ":" + string(h.Outcome))
		if h.Attempt != 0 {
			b.WriteString("#" + string(rune('0'+h.Attempt)))
		}
		if h.Error != nil {
			b.WriteString("(" + h.Error.Type + ")")
		}
		b.WriteString(" ")
	}
	return b.String()
}

// Two visits of a step through a catch loop, each running into its
// deadline after its effect, then a success: each visit is found out under
// its own key, and each effect is undone.
func TestUnknownOutcomeOfEachVisitOfACatchLoopIsFoundOut(t *testing.T) {
	t.Parallel()
	src := `
saga: loop
steps:
  - id: prep
    action: x.prep
  - id: charge
    action: pay.charge
    retry: {attempts: 1}
    catch: [{errors: [Timeout], next: prep}]
    compensate: {action: pay.refund}
  - id: fail
    action: x.fail
`
	svc := newKeyedService("timeout", "timeout")
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		switch {
		case c.Step == "fail":
			return nil, saga.Permanent(saga.NewError("Rejected", "no"))
		case c.Step == "charge" && c.Compensation:
			svc.undo(c)
		case c.Step == "charge":
			return svc.call(c)
		}
		return map[string]any{}, nil
	})
	e.start("s-1", nil)
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusCompensated {
		t.Fatalf("status %s", st.Status)
	}
	if left := svc.leftUndone(); len(left) != 0 || len(svc.applied) != 3 {
		t.Fatalf("applied %v, left undone %v; want 3 visits applied, all undone", svc.applied, left)
	}
}

// The call that finds out answers success with an output near the state's
// limits: the saga never stays compensating with a transition it cannot
// store; it compensates (reading the output when kept) or parks saying to
// undo by hand.
func TestUnknownOutcomeFoundOutWithALargeOutputEnds(t *testing.T) {
	t.Parallel()
	for _, size := range []int{saga.MaxStateBytes - 20<<10, saga.MaxStateBytes, durable.MaxRecordStateBytes - 6<<10, durable.MaxRecordStateBytes - 2<<10, durable.MaxRecordStateBytes + 1} {
		t.Run(strconv.Itoa(size)+" bytes", func(t *testing.T) {
			calls := 0
			e := newEdgeRig(t, unknownDef("1h", "1", ""), func(ctx context.Context, c saga.Call) (any, error) {
				switch {
				case c.Step == "charge" && !c.Compensation:
					calls++
					if calls == 1 {
						return nil, saga.NewError(lang.ErrorTypeTimeout, "slow")
					}
					return map[string]any{"id": "ch-1", "pad": strings.Repeat("p", size)}, nil
				case c.Step == "fail":
					return nil, saga.Permanent(saga.NewError("Rejected", "no"))
				}
				return map[string]any{"id": c.Step}, nil
			})
			e.start("s-1", nil)
			e.drain()
			st := e.get("s-1")
			switch st.Status {
			case durable.StatusCompensated:
				if !strings.Contains(e.succeeded(), "charge.compensate") {
					t.Fatalf("compensated without the refund; calls %s", e.succeeded())
				}
			case durable.StatusCompensationFailed:
				if !strings.Contains(st.CompensationError.Message, "by hand") {
					t.Fatalf("parked: %v", st.CompensationError)
				}
			default:
				t.Fatalf("status %s after draining (calls %d)", st.Status, calls)
			}
		})
	}
}
