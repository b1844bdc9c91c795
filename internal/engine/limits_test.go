package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// The tests in this file pin the contract at its edges: an
// action that returned success is compensated if the saga compensates,
// whatever happens after it.

const bigOutputSaga = `
saga: big
input: {blob: string}
steps:
  - id: reserve
    action: inv.reserve
    out: reservation
    compensate: {action: inv.release, with: {id: "${vars.reservation.id}"}}
  - id: charge
    action: pay.charge
    out: payment
    compensate: {action: pay.refund}
  - id: grow
    set: {copy: "${input.blob + input.blob + input.blob}"}
  - id: ship
    action: ship.send
    out: shipment
    compensate: {action: ship.cancel}
`

func TestEdgeOutputTooLargeIsStillCompensated(t *testing.T) {
	big := strings.Repeat("x", saga.MaxStateBytes)
	e := newEdgeRig(t, bigOutputSaga, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "charge" && !c.Compensation {
			return map[string]any{"receipt": big}, nil
		}
		return map[string]any{"id": c.Step + "-1"}, nil
	})
	e.start("s-1", map[string]any{"blob": "b"})
	e.drain()
	e.ended(t, "s-1", durable.StatusCompensated, lang.ErrorTypeStateTooLarge, "charge", "reserve charge charge.compensate reserve.compensate")
}

func TestEdgeSetAfterActionGrowsStateIsBlamedOnTheSet(t *testing.T) {
	blob := strings.Repeat("y", 90<<10) // three copies and the input pass the state limit
	e := newEdgeRig(t, bigOutputSaga, nil)
	e.start("s-1", map[string]any{"blob": blob})
	e.drain()
	e.ended(t, "s-1", durable.StatusCompensated, lang.ErrorTypeStateTooLarge, "grow", "reserve charge charge.compensate reserve.compensate")
}

func TestEdgeLargeInputEchoedByActionsIsCompensated(t *testing.T) {
	// The order saga with 120 items of 1,000 characters: each action echoes
	// its input, so the state grows past the limit at ship.
	src := `
saga: order
input: {items: list}
steps:
  - id: reserve
    action: inventory.reserve
    with: {items: "${input.items}"}
    out: reservation
    compensate: {action: inventory.release}
  - id: charge
    action: payments.charge
    out: payment
    compensate: {action: payments.refund}
  - id: ship
    action: shipping.ship
    with: {items: "${input.items}"}
    out: shipment
    compensate: {action: shipping.cancel}
`
	items := make([]any, 120)
	for i := range items {
		items[i] = strings.Repeat("i", 1000)
	}
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) { return c.Input, nil })
	e.start("s-1", map[string]any{"items": items})
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusCompensated {
		t.Fatalf("status %s, want compensated", st.Status)
	}
	e.checkCompensated(t, "reserve", "charge", "ship")
}

func TestEdgeCatchRoutingGrowthEnds(t *testing.T) {
	// StateTooLarge cannot be caught: a catch could only route it into more growth.
	src := `
saga: grow
input: {blob: string}
steps:
  - id: first
    action: a.first
    compensate: {action: a.undo}
  - id: act
    action: a.do
    out: r
    compensate: {action: a.undo}
    catch: [{errors: ["*"], next: grow}]
  - id: grow
    set: {x: "${input.blob + input.blob + input.blob}"}
`
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "act" && !c.Compensation {
			return strings.Repeat("r", saga.MaxStateBytes), nil
		}
		return nil, nil
	})
	e.start("s-1", map[string]any{"blob": strings.Repeat("z", 110<<10)})
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusCompensated || st.Failure.Type != lang.ErrorTypeStateTooLarge {
		t.Fatalf("status %s failure %+v, want compensated with StateTooLarge", st.Status, st.Failure)
	}
	e.checkCompensated(t, "first", "act")
}

func TestEdgeDepthLimitIsOneLimit(t *testing.T) {
	nest := func(n int) any {
		var v any = "leaf"
		for range n {
			v = []any{v}
		}
		return v
	}
	// Whatever CheckValue accepts, the state codec stores, as a var and as input.
	for _, n := range []int{saga.MaxDataDepth - 1, saga.MaxDataDepth, saga.MaxDataDepth + 1} {
		v, err := saga.CheckValue(nest(n))
		if n > saga.MaxDataDepth {
			if err == nil {
				t.Errorf("depth %d: CheckValue accepted a value past MaxDataDepth", n)
			}
			continue
		}
		if err != nil {
			t.Fatalf("depth %d: CheckValue: %v", n, err)
		}
		st := &saga.State{SagaID: "s", Input: map[string]any{"v": v}, Vars: map[string]any{"v": v}}
		st.Output = v
		st.Stack = []saga.Completion{{Out: v, HasOut: true}}
		b, err := st.MarshalBinary()
		if err != nil {
			t.Fatalf("depth %d: CheckValue accepted it but the codec refused: %v", n, err)
		}
		var back saga.State
		if err := back.UnmarshalBinary(b); err != nil {
			t.Fatalf("depth %d: decode: %v", n, err)
		}
	}
}

func TestEdgeDeepActionOutputFailsTheStepOnce(t *testing.T) {
	var v any = "leaf"
	for range saga.MaxDataDepth + 5 {
		v = map[string]any{"k": v}
	}
	calls := 0
	e := newEdgeRig(t, bigOutputSaga, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "charge" && !c.Compensation {
			calls++
			return v, nil
		}
		return map[string]any{"id": c.Step + "-1"}, nil
	})
	e.start("s-1", map[string]any{"blob": "b"})
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusCompensated || calls != 1 {
		t.Fatalf("status %s after %d charge calls, want compensated after 1", st.Status, calls)
	}
	e.checkCompensated(t, "reserve", "charge")
}

func TestEdgeDeepInputWithinTheLimitRuns(t *testing.T) {
	var v any = "leaf"
	for range saga.MaxDataDepth - 1 {
		v = []any{v}
	}
	src := `
saga: order
input: {items: list}
steps:
  - id: reserve
    action: inventory.reserve
    with: {items: "${input.items}"}
    out: reservation
    compensate: {action: inventory.release}
`
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) { return c.Input, nil })
	e.start("s-1", map[string]any{"items": v})
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("status %s (%v), want succeeded", st.Status, st.Failure)
	}
}

func TestEdgeActionRunningIntoTheInvocationDeadlineIsRecorded(t *testing.T) {
	src := `
saga: slow
steps:
  - id: first
    action: a.first
    compensate: {action: a.undo}
  - id: slow
    action: a.slow
    timeout: 1s
    retry: {attempts: 2, backoff: 1s}
`
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "slow" {
			<-ctx.Done() // runs until it is stopped
			return nil, ctx.Err()
		}
		return nil, nil
	})
	e.start("s-1", nil)
	d, _ := e.receive()
	engine.HandleDelivery(context.Background(), e.coord, e.q, d, nil) // first
	d, _ = e.receive()
	ctx, cancel := context.WithTimeout(context.Background(), saga.ResultReserve+200*time.Millisecond)
	defer cancel()
	if _, err := e.coord.Handle(ctx, d.Body); err != nil {
		t.Fatalf("the attempt cut off by the deadline was not recorded: %v", err)
	}
	st := e.get("s-1")
	if cur, ok := st.Pending(); !ok || cur.Attempt != 2 {
		t.Fatalf("after the cut-off attempt: %+v, want attempt 2 pending", st.Cursors)
	}
	e.drain()
	st = e.get("s-1")
	if st.Status != durable.StatusCompensated || st.Failure.Type != lang.ErrorTypeTimeout {
		t.Fatalf("status %s failure %+v, want compensated after Timeout", st.Status, st.Failure)
	}
	e.checkCompensated(t, "first")
}

func TestEdgeNoTimeLeftHandsTheMessageBack(t *testing.T) {
	ran := false
	e := newEdgeRig(t, bigOutputSaga, func(ctx context.Context, c saga.Call) (any, error) { ran = true; return nil, nil })
	e.start("s-1", map[string]any{"blob": "b"})
	d, _ := e.receive()
	ctx, cancel := context.WithTimeout(context.Background(), saga.ResultReserve/2)
	defer cancel()
	if _, err := e.coord.Handle(ctx, d.Body); err == nil || ran {
		t.Fatalf("with less than ResultReserve left: err %v, action ran %v; want the message handed back unrun", err, ran)
	}
	if st := e.get("s-1"); st.Version != 1 {
		t.Fatalf("version %d, want 1 (nothing written)", st.Version)
	}
}

func TestEdgeCatchLoopsEnd(t *testing.T) {
	tests := []struct{ name, src string }{
		{"action caught into an earlier step", `
saga: loop
steps:
  - id: a
    action: x.a
    compensate: {action: x.undo}
  - id: b
    action: x.fails
    catch: [{errors: ["*"], next: back}]
  - id: done
    succeed: {}
  - id: back
    set: {n: "${1}"}
    next: b
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEdgeRig(t, tt.src, func(ctx context.Context, c saga.Call) (any, error) {
				if c.Step == "b" {
					return nil, saga.Permanent(saga.NewError("No", "no"))
				}
				return nil, nil
			})
			e.plan = mustCompileOpts(t, tt.src, saga.Options{MaxVisits: 50})
			e.start("s-1", nil)
			for range 200 {
				d, ok := e.receive()
				if !ok {
					break
				}
				engine.HandleDelivery(context.Background(), e.coord, e.q, d, nil)
			}
			st := e.get("s-1")
			if st.Status != durable.StatusCompensated {
				t.Fatalf("status %s, want compensated", st.Status)
			}
			if !lang.Uncatchable(st.Failure.Type) {
				t.Fatalf("failure %+v, want a limit", st.Failure)
			}
			e.checkCompensated(t, "a")
		})
	}
}

func TestEdgeDamagedStateIsAnErrorNotAPanic(t *testing.T) {
	e := newEdgeRig(t, bigOutputSaga, nil)
	st := e.start("s-1", map[string]any{"blob": "b"})
	d, _ := e.receive()
	damaged := *st
	damaged.Cursors = []saga.Cursor{{Step: 99, Attempt: 1, Seq: 1}}
	b, err := damaged.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	rec := durable.SagaRecord{SagaID: "s-1", Version: st.Version + 0, Status: st.Status, Name: st.Name, DefinitionHash: st.DefinitionHash, State: b}
	damaged.Version++
	if b, err = damaged.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	rec.State, rec.Version = b, damaged.Version
	if err := e.store.SagaUpdate(context.Background(), &durable.SagaUpdateParams{Record: rec, ExpectedVersion: st.Version}); err != nil {
		t.Fatal(err)
	}
	var msg durable.Message
	if msg, err = durable.DecodeMessage(d.Body); err != nil {
		t.Fatal(err)
	}
	msg.Version = damaged.Version
	body := durable.AppendMessage(nil, msg)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Handle panicked on a damaged state: %v", r)
			}
		}()
		_, err = e.coord.Handle(context.Background(), body)
	}()
	if !errors.Is(err, engine.ErrDamagedState) {
		t.Fatalf("err %v, want ErrDamagedState", err)
	}
}

func TestEdgeErrorMessagesAreBounded(t *testing.T) {
	huge := strings.Repeat("e", 1<<20)
	e := newEdgeRig(t, bigOutputSaga, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "ship" {
			return nil, saga.Permanent(saga.NewError(strings.Repeat("T", 10_000), huge))
		}
		return map[string]any{"id": c.Step + "-1"}, nil
	})
	e.start("s-1", map[string]any{"blob": "b"})
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusCompensated {
		t.Fatalf("status %s", st.Status)
	}
	if n := len(st.Failure.Message) + len(st.Failure.Type); n > 2*saga.MaxErrorMessageBytes {
		t.Fatalf("failure kept %d bytes", n)
	}
	e.checkCompensated(t, "reserve", "charge")
}

var _ = fmt.Sprint

func TestEdgeSkipCompensationAfterManualUndo(t *testing.T) {
	// The charge's refund reads an output that could not be kept: the saga
	// parks; the operator refunds by hand and resumes with skip, and the
	// compensations before it run.
	src := `
saga: skip
steps:
  - id: reserve
    action: inv.reserve
    compensate: {action: inv.release}
  - id: charge
    action: pay.charge
    out: payment
    compensate: {action: pay.refund, with: {id: "${vars.payment.id}"}}
  - id: fail
    fail: {error: Nope}
`
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "charge" && !c.Compensation {
			return map[string]any{"id": strings.Repeat("p", 2*saga.MaxStateBytes)}, nil
		}
		return nil, nil
	})
	e.start("s-1", nil)
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusCompensationFailed || !strings.Contains(st.CompensationError.Message, "resume with --skip") {
		t.Fatalf("status %s %+v, want parked at the refund, saying how to go on", st.Status, st.CompensationError)
	}
	if _, err := e.coord.SkipCompensation(context.Background(), "s-1"); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if st := e.get("s-1"); st.Status != durable.StatusCompensated {
		t.Fatalf("after skip: %s", st.Status)
	}
	if got := e.succeeded(); got != "reserve charge reserve.compensate" {
		t.Fatalf("calls %q", got)
	}
}

func TestEdgeRegistryRefusesNamesNoDefinitionCanCall(t *testing.T) {
	reg := engine.NewRegistry()
	noop := func(context.Context, saga.Call) (any, error) { return nil, nil }
	for _, name := range []string{" ", "pay ments.charge", "lambda:fn", "1abc"} {
		if err := reg.Register(name, noop); err == nil {
			t.Errorf("Register(%q) accepted a name no definition can call", name)
		}
	}
	if err := reg.Register("payments.charge", noop); err != nil {
		t.Fatal(err)
	}
}

func TestEdgeTooDeepSaysSoOnce(t *testing.T) {
	var v any = "leaf"
	for range saga.MaxDataDepth + 3 {
		v = map[string]any{"k": []any{v}}
	}
	_, err := saga.CheckValue(v)
	if err == nil || strings.Count(err.Error(), "k") > 1 || len(err.Error()) > 100 {
		t.Fatalf("err %q, want one short message", err)
	}
}

func TestEdgeDroppedOutputIsNotReadFromAnEarlierStep(t *testing.T) {
	// Two steps write vars.p; the second's output is too large to keep. Its
	// refund must not be built from the first step's p.
	src := `
saga: k
steps:
  - {id: a, action: pay.charge, with: {n: 1}, out: p, compensate: {action: pay.refund, with: {id: "${vars.p.id}"}}}
  - {id: b, action: pay.charge, with: {n: 2}, out: p, compensate: {action: pay.refund, with: {id: "${vars.p.id}"}}}
  - {id: c, action: svc.c}
`
	var refunds []string
	var mu sync.Mutex
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		in, _ := c.Input.(map[string]any)
		switch {
		case c.Compensation:
			mu.Lock()
			refunds = append(refunds, c.Step+":"+fmt.Sprint(in["id"]))
			mu.Unlock()
			return nil, nil
		case c.Step == "b":
			return map[string]any{"id": "pay-2", "pad": strings.Repeat("x", 2*saga.MaxStateBytes)}, nil
		}
		return map[string]any{"id": "pay-1"}, nil
	})
	e.start("s-1", nil)
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusCompensationFailed || st.CompensationError.Step != "b" {
		t.Fatalf("status %s %+v, want parked at b's refund (its output was not kept)", st.Status, st.CompensationError)
	}
	if len(refunds) != 0 {
		t.Fatalf("refunds %v: b's refund was built from a's payment", refunds)
	}
	if msg := st.CompensationError.Error(); strings.Count(msg, "ExpressionError") != 1 || strings.Count(msg, "step b") != 1 {
		t.Fatalf("compensation error %q repeats its type or step", msg)
	}
}

func TestEdgeHugeCELResultFailsTheStep(t *testing.T) {
	src := `
saga: bomb
input: {l: list}
steps:
  - {id: a, action: x.y, out: o, compensate: {action: x.z}}
  - {id: b, set: {x: "${input.l.map(a, input.l)}"}}
  - {id: c, action: x.y}
`
	l := make([]any, 4000)
	for i := range l {
		l[i] = int64(i)
	}
	e := newEdgeRig(t, src, nil)
	// The size budget is the point here, not the evaluation deadline, which
	// a loaded machine (or the race detector) can meet first: give the
	// evaluation all the time it needs.
	e.plan = mustCompileOpts(t, src, saga.Options{EvalTimeout: time.Minute})
	e.start("s-1", map[string]any{"l": l})
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusCompensated || st.Failure.Step != "b" || st.Failure.Type != lang.ErrorTypeExpression || !strings.Contains(st.Failure.Message, "larger than") {
		t.Fatalf("status %s %+v, want compensated at b: its result is larger than a state can hold", st.Status, st.Failure)
	}
	e.checkCompensated(t, "a")
}

func TestEdgeCancelDuringBackoffCompensatesAtOnce(t *testing.T) {
	src := `
saga: r
steps:
  - {id: a, action: x.a, compensate: {action: x.undo}}
  - {id: pay, action: x.pay, retry: {attempts: 3, backoff: 10m, max_backoff: 15m}, compensate: {action: x.refund}}
`
	payCalls := 0
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "pay" && !c.Compensation {
			payCalls++
			return nil, errors.New("busy")
		}
		return nil, nil
	})
	e.start("s-1", nil)
	for range 2 { // a, then pay's first attempt (fails, retry in 10m)
		d, _ := e.receive()
		engine.HandleDelivery(context.Background(), e.coord, e.q, d, nil)
	}
	st, err := e.coord.Cancel(context.Background(), "s-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusCompensating || st.CancelRequested {
		t.Fatalf("after a cancel during the backoff: %s requested %v, want compensating at once", st.Status, st.CancelRequested)
	}
	e.drain()
	if st := e.get("s-1"); st.Status != durable.StatusCompensated || payCalls != 1 {
		t.Fatalf("status %s, pay called %d times, want compensated with no new attempt", st.Status, payCalls)
	}
	e.checkCompensated(t, "a")
}

func TestEdgeExpressionErrorsDoNotEchoValues(t *testing.T) {
	src := `
saga: echo
input: {m: map, s: string, l: list, n: int}
steps:
  - {id: a, set: {x: "${input.m[input.s]}"}}
`
	for _, tt := range []struct{ src, s, secret string }{
		{src, "4111111111111111", "4111111111111111"},
		{strings.Replace(src, "input.m[input.s]", "timestamp(input.s)", 1), "4111111111111111", "4111111111111111"},
		{strings.Replace(src, "input.m[input.s]", "input.l[input.n]", 1), "4111111111111111", "-7777"},
		// A value that contains the word "overload" is masked like any
		// other.
		{src, "SECRET-4111 overload", "SECRET-4111"},
		{strings.Replace(src, "input.m[input.s]", "timestamp(input.s)", 1), "SECRET-4111 overload", "SECRET-4111"},
		{strings.Replace(src, "input.m[input.s]", "input.s.matches(input.s)", 1), "SECRET( no overload", "SECRET("},
	} {
		e := newEdgeRig(t, tt.src, nil)
		e.start("s-1", map[string]any{"m": map[string]any{}, "s": tt.s, "l": []any{}, "n": -7777})
		st := e.get("s-1")
		if st.Failure == nil || strings.Contains(st.Failure.Message, tt.secret) {
			t.Errorf("failure %+v echoes the input's value", st.Failure)
		}
	}
}

func TestEdgeStateWithoutVarsIsHandled(t *testing.T) {
	e := newEdgeRig(t, bigOutputSaga, nil)
	st := e.start("s-1", map[string]any{"blob": "b"})
	d, _ := e.receive()
	damaged := *st
	damaged.Vars, damaged.Input = nil, nil
	damaged.Version++
	b, err := damaged.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	rec := durable.SagaRecord{SagaID: "s-1", Version: damaged.Version, Status: st.Status, Name: st.Name, DefinitionHash: st.DefinitionHash, State: b}
	if err := e.store.SagaUpdate(context.Background(), &durable.SagaUpdateParams{Record: rec, ExpectedVersion: st.Version}); err != nil {
		t.Fatal(err)
	}
	msg, _ := durable.DecodeMessage(d.Body)
	msg.Version = damaged.Version
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Handle panicked on a state without vars: %v", r)
			}
		}()
		_, _ = e.coord.Handle(context.Background(), durable.AppendMessage(nil, msg))
	}()
}

func TestEdgeInputSizeIsTheJSONTheUserSent(t *testing.T) {
	p := mustCompile(t, "saga: s\ninput: {s: string}\nsteps: [{id: a, action: x.y}]\n")
	if _, err := p.CheckInput(map[string]any{"s": strings.Repeat("<", 25000)}); err != nil {
		t.Fatalf("25,000 '<' (25 kB as JSON) refused: %v", err)
	}
}

func TestEdgeStepTimeoutThatNoLongerFitsIsHandedBack(t *testing.T) {
	src := `
saga: t
steps:
  - {id: a, action: x.a, timeout: 1s}
`
	ran := 0
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) { ran++; return nil, nil })
	e.start("s-1", nil)
	d, _ := e.receive()
	// 2.5 s left of an invocation that had 10 s: the 1 s step and the 2 s
	// reserve do not fit, but they would in a fresh invocation.
	ctx, cancel := context.WithTimeout(engine.WithInvocationBudget(context.Background(), 10*time.Second), 2500*time.Millisecond)
	defer cancel()
	if _, err := e.coord.Handle(ctx, d.Body); !errors.Is(err, engine.ErrNoTime) || ran != 0 {
		t.Fatalf("err %v, ran %d: want the record handed back unrun", err, ran)
	}
	// The same time left in an invocation that never had more: run it.
	ctx2, cancel2 := context.WithTimeout(engine.WithInvocationBudget(context.Background(), 2500*time.Millisecond), 2500*time.Millisecond)
	defer cancel2()
	if _, err := e.coord.Handle(ctx2, d.Body); err != nil || ran != 1 {
		t.Fatalf("err %v, ran %d: want it run, as no invocation could give more", err, ran)
	}
	// HandBack sends the message again, at once.
	msg, _ := durable.DecodeMessage(d.Body)
	before := e.queue.sent.Load()
	if err := e.coord.HandBack(context.Background(), msg); err != nil || e.queue.sent.Load() != before+1 {
		t.Fatalf("hand back: %v, sent %d", err, e.queue.sent.Load()-before)
	}
}

func TestEdgeCompensationReadsItsOwnOutput(t *testing.T) {
	// Two steps write vars.p, and a set overwrites it: each refund must
	// read the payment of its own step.
	src := `
saga: own
steps:
  - {id: a, action: pay.charge, out: p, compensate: {action: pay.refund, with: {id: "${vars.p.id}"}}}
  - {id: b, action: pay.charge, out: p, compensate: {action: pay.refund, with: {id: "${vars.p.id}"}}}
  - {id: c, action: pay.charge, out: q, compensate: {action: pay.refund, with: {id: "${vars.q.id}"}}}
  - {id: over, set: {q: "${{'id': 'overwritten'}}"}}
  - {id: f, fail: {error: Nope}}
`
	var refunds []string
	var mu sync.Mutex
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Compensation {
			in, _ := c.Input.(map[string]any)
			mu.Lock()
			refunds = append(refunds, c.Step+":"+fmt.Sprint(in["id"]))
			mu.Unlock()
			return nil, nil
		}
		return map[string]any{"id": c.Step + "-pay"}, nil
	})
	e.start("s-1", nil)
	e.drain()
	if got, want := strings.Join(refunds, " "), "c:c-pay b:b-pay a:a-pay"; got != want {
		t.Fatalf("refunds %q, want %q", got, want)
	}
}

func TestEdgeLibraryCallsCannotBuildHugeValues(t *testing.T) {
	// Each of these builds gigabytes from a 100 KB string in one library
	// call; each must fail its step before the value is built.
	for _, expr := range []string{
		"input.s.replace('', input.s)",
		"input.l.map(a, input.s).join('')",
		`"%s".format([input.l.map(a, input.l)])`,
		"input.l.map(a, input.l).flatten()",
		"size(input.l.map(a, input.s).join('')) > 0",
	} {
		t.Run(expr, func(t *testing.T) {
			src := "saga: bomb\ninput: {l: list, s: string}\nsteps:\n" +
				"  - {id: a, action: x.y, compensate: {action: x.z}}\n" +
				"  - {id: b, set: {x: \"${" + strings.ReplaceAll(expr, `"`, `\"`) + "}\"}}\n"
			l := make([]any, 4000)
			for i := range l {
				l[i] = int64(i)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			e := newEdgeRig(t, src, nil)
			// Only the size guard is the point: the evaluation deadline,
			// which the race detector's slowness can meet first, is lifted.
			e.plan = mustCompileOpts(t, src, saga.Options{EvalTimeout: time.Minute})
			e.start("s-1", map[string]any{"l": l, "s": strings.Repeat("s", 100<<10)})
			e.drain()
			runtime.ReadMemStats(&after)
			st := e.get("s-1")
			if st.Status != durable.StatusCompensated || st.Failure.Step != "b" {
				t.Fatalf("status %s %+v, want compensated at b", st.Status, st.Failure)
			}
			if !strings.Contains(st.Failure.Message, "larger than") {
				t.Errorf("failure %q does not say why (the redaction cut the guard's reason off)", st.Failure.Message)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 200<<20 {
				t.Fatalf("allocated %d MB: the value was built before it was refused", grew>>20)
			}
		})
	}
}

func TestEdgeGuardedLibraryCallsStillWork(t *testing.T) {
	src := `
saga: ok
input: {s: string}
steps:
  - id: a
    succeed:
      output:
        r: "${input.s.replace('-', '_')}"
        e: "${'ab'.replace('', '.')}"
        j: "${['a', 'b'].join(',')}"
        f: "${'%s and %d'.format(['x', 2])}"
        l: "${[[1], [2, [3]]].flatten()}"
`
	e := newEdgeRig(t, src, nil)
	e.start("s-1", map[string]any{"s": "a-b"})
	st := e.get("s-1")
	want := map[string]any{"r": "a_b", "e": ".a.b.", "j": "a,b", "f": "x and 2", "l": []any{int64(1), int64(2), []any{int64(3)}}}
	if st.Status != durable.StatusSucceeded || !equalValues(st.Output, want) {
		t.Fatalf("%s %#v (%v), want %#v", st.Status, st.Output, st.Failure, want)
	}
}

func TestEdgeFailedSetWritesNothingWhenMeasured(t *testing.T) {
	// v2 grows the state past its limit, then v3 fails: the start must
	// still store a failed saga (it stored nothing: state too large).
	src := `
saga: partial
input: {s: string, n: int}
steps:
  - id: s1
    set: {v2: "${input.s + input.s + input.s}", v3: "${9223372036854775807 + input.n}"}
`
	e := newEdgeRig(t, src, nil)
	st, err := e.coord.Start(context.Background(), &engine.StartParams{Plan: e.plan, SagaID: "s-1", Input: map[string]any{"s": strings.Repeat("a", 100<<10), "n": int64(1)}})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Step != "s1" {
		t.Fatalf("status %s %+v, want compensated at s1", st.Status, st.Failure)
	}
}

func TestEdgeAFreshInvocationNeverHandsBack(t *testing.T) {
	// A step whose timeout and the reserve all but fill a fresh invocation:
	// what is left after loading is a few microseconds short. Handing it
	// back would hand it back again forever; it must run.
	src := `
saga: t
steps:
  - {id: a, action: x.a, timeout: 1s}
`
	ran := 0
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) { ran++; return nil, nil })
	e.start("s-1", nil)
	d, _ := e.receive()
	budget := time.Second + saga.ResultReserve
	ctx, cancel := context.WithTimeout(engine.WithInvocationBudget(context.Background(), budget), budget)
	defer cancel()
	if _, err := e.coord.Handle(ctx, d.Body); err != nil || ran != 1 {
		t.Fatalf("err %v, ran %d: a fresh invocation must run the step", err, ran)
	}
}

func TestEdgePanicTextHidesValues(t *testing.T) {
	var runtimeErr any
	func() {
		defer func() { runtimeErr = recover() }()
		var m map[string]int
		m["x"] = 1 //lint:ignore SA5000 the test needs a real runtime panic
	}()
	if got := engine.PanicText(runtimeErr); !strings.Contains(got, "nil map") {
		t.Errorf("runtime panic described as %q, want the runtime's text", got)
	}
	if got := engine.PanicText("card 4111111111111111"); strings.Contains(got, "4111") || !strings.Contains(got, "string") {
		t.Errorf("panic value described as %q, want its type only", got)
	}
}

func TestEdgeCancelWhileAnActionRuns(t *testing.T) {
	// The cancel lands while charge runs; charge then answers. The service
	// answers a repeated key differently (Declined): the first answer must
	// be the one recorded, never lost to the cancel's write and asked again;
	// a success is compensated, a failure is not retried; nothing after
	// charge runs.
	tests := []struct {
		name   string
		answer func() (any, error)
		calls  string
	}{
		{"success", func() (any, error) { return map[string]any{"id": "p"}, nil },
			"reserve charge charge.compensate reserve.compensate"},
		{"success too large to store", func() (any, error) {
			return map[string]any{"id": "p", "pad": strings.Repeat("x", saga.MaxStateBytes)}, nil
		}, "reserve charge charge.compensate reserve.compensate"},
		{"retryable failure", func() (any, error) { return nil, errors.New("busy") },
			"reserve reserve.compensate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			charges := 0
			var e *edgeRig
			e = newEdgeRig(t, bigOutputSaga, func(ctx context.Context, c saga.Call) (any, error) {
				if c.Step == "charge" && !c.Compensation {
					if charges++; charges > 1 {
						return nil, saga.Permanent(saga.NewError("Declined", "asked twice"))
					}
					if _, err := e.coord.Cancel(context.Background(), c.SagaID); err != nil {
						return nil, err
					}
					return tt.answer()
				}
				return map[string]any{"id": c.Step + "-1"}, nil
			})
			e.start("s-1", map[string]any{"blob": "b"})
			e.drain()
			if charges != 1 {
				t.Fatalf("charge called %d times, want once", charges)
			}
			e.ended(t, "s-1", durable.StatusCompensated, lang.ErrorTypeCancelled, "", tt.calls)
		})
	}
}

// A skip that comes after a plain resume has landed skips nothing: the
// resume already sent the failed compensation on its way, so the skip is
// refused (the operator who undid the step by hand must not see it undone
// a second time behind a success).
func TestEdgeSkipAfterAResumeIsRefused(t *testing.T) {
	src := `
saga: skip
steps:
  - id: charge
    action: pay.charge
    compensate: {action: pay.refund}
  - id: fail
    fail: {error: Nope}
`
	refunds := 0
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Compensation {
			refunds++
			if refunds == 1 {
				return nil, saga.Permanent(errors.New("refund service down"))
			}
		}
		return nil, nil
	})
	e.start("s-1", nil)
	e.drain()
	if st := e.get("s-1"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("status %s, want parked", st.Status)
	}
	if _, err := e.coord.Resume(context.Background(), "s-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.coord.SkipCompensation(context.Background(), "s-1"); !errors.Is(err, saga.ErrInvalidEvent) {
		t.Fatalf("skip after a resume: %v, want ErrInvalidEvent (nothing was skipped)", err)
	}
	// A plain resume retried is still a retry.
	if _, err := e.coord.Resume(context.Background(), "s-1"); err != nil {
		t.Fatalf("resume retried: %v", err)
	}
	e.drain()
	if st := e.get("s-1"); st.Status != durable.StatusCompensated || refunds != 2 {
		t.Fatalf("status %s after %d refund calls, want compensated after the resumed refund", st.Status, refunds)
	}
}

// A cancel that lands while an action runs does not put that attempt's
// message where a second worker would take it at once and run the action
// again beside the first: the message already in flight is the one that
// runs it, at the cancel's version.
func TestEdgeCancelDuringActionStartsNoSecondRun(t *testing.T) {
	charges := 0
	var e *edgeRig
	e = newEdgeRig(t, bigOutputSaga, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "charge" && !c.Compensation {
			if charges++; charges > 1 {
				return nil, saga.Permanent(saga.NewError("Declined", "asked twice"))
			}
			if _, err := e.coord.Cancel(context.Background(), c.SagaID); err != nil {
				return nil, err
			}
			// Another worker polls at once, as a second Lambda would.
			if ds, _ := e.q.Receive(context.Background(), &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10}); len(ds) != 0 {
				t.Errorf("the cancel made the charge's message visible at once: %d message(s)", len(ds))
			}
			return map[string]any{"id": "p"}, nil
		}
		return map[string]any{"id": c.Step + "-1"}, nil
	})
	e.start("s-1", map[string]any{"blob": "b"})
	e.drain()
	if charges != 1 {
		t.Fatalf("charge ran %d times", charges)
	}
	e.checkCompensated(t, "reserve", "charge")
}

// The message of an attempt that a cancel keeps pending still runs it when
// it arrives after the cancel (its worker crashed, or it had not been
// received yet): the cancel waits for exactly that attempt.
func TestEdgeAttemptMessageRunsAfterTheCancelThatWaitsForIt(t *testing.T) {
	e := newEdgeRig(t, bigOutputSaga, nil)
	e.start("s-1", map[string]any{"blob": "b"})
	d, _ := e.receive() // reserve
	if _, err := e.coord.Handle(context.Background(), d.Body); err != nil {
		t.Fatal(err)
	}
	d, _ = e.receive() // charge, not yet handled
	if _, err := e.coord.Cancel(context.Background(), "s-1"); err != nil {
		t.Fatal(err)
	}
	if out, err := e.coord.Handle(context.Background(), d.Body); err != nil || out != engine.HandledStep {
		t.Fatalf("the charge's message after the cancel: %s %v, want it run", out, err)
	}
	e.drain()
	e.checkCompensated(t, "reserve", "charge")
}

// The action's context ends saga.ResultReserve before the invocation's
// deadline, so its outcome is always written and sent; a step timeout that
// comes first ends it instead. (The earlier deadline test was cut by its
// own step timeout, so giving the action the whole invocation passed it.)
func TestEdgeActionContextEndsBeforeTheInvocation(t *testing.T) {
	for _, tc := range []struct {
		name, timeout string
		want          func(invocation time.Time) time.Time
	}{
		{"untimed step", "", func(inv time.Time) time.Time { return inv.Add(-saga.ResultReserve) }},
		{"step timeout later than the reserve", ", timeout: 15m", func(inv time.Time) time.Time { return inv.Add(-saga.ResultReserve) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got time.Time
			e := newEdgeRig(t, "saga: t\nsteps:\n  - {id: a, action: x.a"+tc.timeout+"}\n", func(ctx context.Context, c saga.Call) (any, error) {
				got, _ = ctx.Deadline()
				return nil, nil
			})
			e.start("s-1", nil)
			d, _ := e.receive()
			inv := time.Now().Add(20 * time.Second)
			ctx, cancel := context.WithDeadline(context.Background(), inv)
			defer cancel()
			if _, err := e.coord.Handle(ctx, d.Body); err != nil {
				t.Fatal(err)
			}
			if want := tc.want(inv); !got.Equal(want) {
				t.Fatalf("the action's deadline is %s before the invocation's, want %s", inv.Sub(got), inv.Sub(want))
			}
		})
	}
	// A step timeout before the reserve ends the action at the timeout.
	var left time.Duration
	e := newEdgeRig(t, "saga: t\nsteps:\n  - {id: a, action: x.a, timeout: 3s}\n", func(ctx context.Context, c saga.Call) (any, error) {
		dl, _ := ctx.Deadline()
		left = time.Until(dl)
		return nil, nil
	})
	e.start("s-1", nil)
	d, _ := e.receive()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.coord.Handle(ctx, d.Body); err != nil {
		t.Fatal(err)
	}
	if left <= 2*time.Second || left > 3*time.Second {
		t.Fatalf("a 3 s step in a 20 s invocation got %s", left)
	}
}

// A cancel within the clock-skew margin of the retry's due time waits for
// that attempt, which another worker's clock may already have started: it
// does not compensate at once.
func TestEdgeCancelNearTheRetryTimeWaitsForTheAttempt(t *testing.T) {
	src := `
saga: r
steps:
  - {id: pay, action: x.pay, retry: {attempts: 3, backoff: 10m, max_backoff: 15m, jitter: false}, compensate: {action: x.refund}}
`
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if !c.Compensation {
			return nil, errors.New("busy")
		}
		return nil, nil
	})
	e.start("s-1", nil)
	d, _ := e.receive() // the first attempt fails: a retry in 10 minutes
	engine.HandleDelivery(context.Background(), e.coord, e.q, d, nil)
	e.clock.Advance(10*time.Minute - 3*time.Second) // 3 s before it is due
	st, err := e.coord.Cancel(context.Background(), "s-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusRunning || !st.CancelRequested {
		t.Fatalf("a cancel 3 s before the retry is due: %s, requested %v; want it to wait for the attempt", st.Status, st.CancelRequested)
	}
}
