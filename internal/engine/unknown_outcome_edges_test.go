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

// Edges of finding out an attempt whose outcome is unknown: what counts
// as an answer, the input and token the call carries, its time, forks,
// loops and large outputs.

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
	// As in TestEdgeStepTimeoutThatNoLongerFitsIsHandedBack: 2.5 s left of
	// an invocation that had 10 s; the 1 s step timeout and the 2 s reserve
	// do not fit.
	ctx, cancel := context.WithTimeout(engine.WithInvocationBudget(context.Background(), 10*time.Second), 2500*time.Millisecond)
	defer cancel()
	if _, err := e.coord.Handle(ctx, d.Body); !errors.Is(err, engine.ErrNoTime) || ran != 1 {
		t.Fatalf("err %v, action ran %d times: want the call that finds out handed back unrun, as the forward attempt is", err, ran)
	}
}

const forkUnknownSaga = `
saga: forkunknown
steps:
  - id: fan
    parallel:
      - steps:
          - id: p1
            action: ledger.do
            retry: {attempts: 1}
            catch: [{errors: [Timeout], next: p1b}]
            compensate: {action: ledger.undo, retry: {attempts: 1}}
          - id: p1b
            action: ledger.do
      - steps:
          - id: p2
            action: ledger.do
            compensate: {action: ledger.undo}
  - id: after
    action: ledger.fail
`

// A branch whose step timed out after its effect, a catch took it, and the
// branch succeeded: when the parent compensates later, it undoes the
// branch, which finds the step out and compensates it. When the call that
// finds out gets no answer, the branch parks and so does the parent; the
// parent's resume resumes the branch, which asks again.
func TestUnknownOutcomeInASucceededBranchIsFoundOutWhenTheParentUndoesIt(t *testing.T) {
	for _, park := range []bool{false, true} {
		name := "answered"
		if park {
			name = "parked, then the parent resumed"
		}
		t.Run(name, func(t *testing.T) {
			p1 := 0
			noAnswer := park
			e := newEdgeRig(t, forkUnknownSaga, func(ctx context.Context, c saga.Call) (any, error) {
				switch {
				case c.Step == "after":
					return nil, saga.Permanent(saga.NewError("Rejected", "no"))
				case c.Step == "p1" && !c.Compensation:
					p1++
					if p1 == 1 || noAnswer {
						return nil, saga.NewError(lang.ErrorTypeTimeout, "slow")
					}
				}
				return map[string]any{"id": c.Step}, nil
			})
			e.start("s-1", nil)
			e.drain()
			if park {
				st := e.get("s-1")
				if st.Status != durable.StatusCompensationFailed {
					t.Fatalf("parent %s, want parked on its branch", st.Status)
				}
				noAnswer = false
				if _, err := e.coord.Resume(context.Background(), "s-1"); err != nil {
					t.Fatal(err)
				}
				e.drain()
			}
			st := e.get("s-1")
			if st.Status != durable.StatusCompensated {
				t.Fatalf("status %s (failure %v, compensation error %v)", st.Status, st.Failure, st.CompensationError)
			}
			e.checkCompensated(t, "p1", "p2")
			if !strings.Contains(e.succeeded(), "p1.compensate") {
				t.Fatalf("calls %q: want p1 found out and compensated", e.succeeded())
			}
		})
	}
}

// The with of a step reads attempt (one endpoint per attempt). Both
// attempts run into their deadline, the first after its effect. The call
// that finds out asks as the last attempt did (its with sees attempt 2,
// never one past retry.attempts), and an expression error, which the
// service never saw, is never taken for its answer.
func TestUnknownOutcomeIsNotDroppedWhenTheCallThatFindsOutCannotBeBuilt(t *testing.T) {
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

func historyOf(t *testing.T, e *edgeRig, st *saga.State) string {
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

// A branch parks on a step whose outcome it cannot find out, and its
// parent parks on the branch. The parent's message names the branch's
// run: skipped there, only the unknown step is skipped, and the branch's
// other completed step is still undone.
func TestUnknownOutcomeInABranchIsSkippedOnTheBranchRun(t *testing.T) {
	src := `
saga: forkskip
steps:
  - id: fan
    parallel:
      - steps:
          - id: p0
            action: ledger.do
            compensate: {action: ledger.undo}
          - id: p1
            action: ledger.do
            retry: {attempts: 1}
            catch: [{errors: [Timeout], next: p1b}]
            compensate: {action: ledger.undo, retry: {attempts: 1}}
          - id: p1b
            action: ledger.do
      - steps:
          - id: p2
            action: ledger.do
  - id: after
    action: ledger.fail
`
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		switch {
		case c.Step == "after":
			return nil, saga.Permanent(saga.NewError("Rejected", "no"))
		case c.Step == "p1" && !c.Compensation:
			return nil, saga.NewError(lang.ErrorTypeTimeout, "slow")
		}
		return map[string]any{"id": c.Step}, nil
	})
	e.start("s-1", nil)
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusCompensationFailed || st.CompensationError == nil {
		t.Fatalf("parent %s, want parked on its branch", st.Status)
	}
	run := durable.ChildID("s-1", "fan", 1, 0)
	if !strings.Contains(st.CompensationError.Message, run) {
		t.Fatalf("parent's message %q does not name the branch's run %s", st.CompensationError.Message, run)
	}
	if _, err := e.coord.SkipCompensation(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	e.drain()
	st = e.get("s-1")
	if st.Status != durable.StatusCompensated || !strings.Contains(e.succeeded(), "p0.compensate") {
		t.Fatalf("parent %s after the branch's skip; calls: %s; want compensated with p0 undone", st.Status, e.succeeded())
	}
}

// The call that finds out answers success with an output near the state's
// limits: the saga never stays compensating with a transition it cannot
// store; it compensates (reading the output when kept) or parks saying to
// undo by hand.
func TestUnknownOutcomeFoundOutWithALargeOutputEnds(t *testing.T) {
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
