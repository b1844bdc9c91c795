package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// An attempt that runs into its deadline (a Timeout) may have taken
// effect. Whenever the saga then compensates without an attempt that
// answered (a cancel, the step's last attempt, the saga's deadline, a
// catch that moved on), compensating first finds it out: the action runs
// again under the same idempotency key, and the service answers what it
// did. A success is compensated with the rest; a definite failure took no
// effect; no answer parks the saga for an operator.

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
			var e *edgeRig
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

const timeoutForkSaga = `
saga: unknownfork
steps:
  - id: f0
    action: ledger.do
    compensate: {action: ledger.undo}
  - id: fan
    parallel:
      - steps:
          - id: p1
            action: ledger.do
            compensate: {action: ledger.undo}
      - steps:
          - id: p2
            action: ledger.do
            retry: {attempts: 3, backoff: 1m, max_backoff: 1m}
            compensate: {action: ledger.undo}
          - id: p3
            action: ledger.do
            compensate: {action: ledger.undo}
  - id: z
    action: ledger.do
`

// A branch's attempt that ran into its deadline after its effect, while
// the parent is cancelled, is found out in the branch as in a saga.
func TestUnknownOutcomeInABranchIsFoundOutWhenTheParentIsCancelled(t *testing.T) {
	for _, when := range []string{"while the attempt runs", "while its retry waits"} {
		t.Run(when, func(t *testing.T) {
			done := map[string]bool{}
			var parent string
			var e *edgeRig
			e = newEdgeRig(t, timeoutForkSaga, func(ctx context.Context, c saga.Call) (any, error) {
				if c.Step != "p2" || c.Compensation {
					return map[string]any{"id": c.Step}, nil
				}
				if done[c.IdempotencyKey] {
					return map[string]any{"id": "p2"}, nil
				}
				done[c.IdempotencyKey] = true
				if when == "while the attempt runs" {
					if _, err := e.coord.Cancel(context.Background(), parent); err != nil {
						return nil, err
					}
				}
				return nil, saga.NewError(lang.ErrorTypeTimeout, "p2 ran into its deadline after its effect")
			})
			parent = "s-1"
			e.start(parent, nil)
			if when == "while its retry waits" {
				for len(done) == 0 {
					d, ok := e.receive()
					if !ok {
						t.Fatal("no message before p2 ran")
					}
					if _, err := e.coord.Handle(context.Background(), d.Body); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := e.coord.Cancel(context.Background(), parent); err != nil {
					t.Fatal(err)
				}
			}
			e.drain()
			st := e.get(parent)
			if st.Status != durable.StatusCompensated {
				t.Fatalf("status %s (failure %v)", st.Status, st.Failure)
			}
			e.checkCompensated(t, "f0", "p1", "p2", "p3")
			if n := strings.Count(e.succeeded(), "p2"); n != 2 {
				t.Fatalf("calls %q: want p2 found out and compensated", e.succeeded())
			}
		})
	}
}

// A success that finds the outcome out counts as one even when its output
// is one state cannot hold: the step took effect. Its compensation reads
// that output, so the saga parks saying to undo it by hand, rather than
// asking the service again and again.
func TestUnknownOutcomeFoundOutWithAnOutputStateCannotHold(t *testing.T) {
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
