package engine_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A saga's limits: the size of its state, of its data's depth, of its
// errors, of the values its expressions build, of its visits. A saga past
// one fails the step that reached it, and what it did is still
// compensated.

func TestOutputTooLargeIsStillCompensated(t *testing.T) {
	t.Parallel()
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

func TestSetAfterActionGrowsStateIsBlamedOnTheSet(t *testing.T) {
	t.Parallel()
	blob := strings.Repeat("y", 90<<10) // three copies and the input pass the state limit
	e := newEdgeRig(t, bigOutputSaga, nil)
	e.start("s-1", map[string]any{"blob": blob})
	e.drain()
	e.ended(t, "s-1", durable.StatusCompensated, lang.ErrorTypeStateTooLarge, "grow", "reserve charge charge.compensate reserve.compensate")
}

func TestLargeInputEchoedByActionsIsCompensated(t *testing.T) {
	t.Parallel()
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

func TestCatchRoutingGrowthEnds(t *testing.T) {
	t.Parallel()
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

func TestDepthLimitIsOneLimit(t *testing.T) {
	t.Parallel()
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

func TestDeepActionOutputFailsTheStepOnce(t *testing.T) {
	t.Parallel()
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

func TestDeepInputWithinTheLimitRuns(t *testing.T) {
	t.Parallel()
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

func TestCatchLoopsEnd(t *testing.T) {
	t.Parallel()
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

func TestErrorMessagesAreBounded(t *testing.T) {
	t.Parallel()
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

func TestTooDeepSaysSoOnce(t *testing.T) {
	t.Parallel()
	var v any = "leaf"
	for range saga.MaxDataDepth + 3 {
		v = map[string]any{"k": []any{v}}
	}
	_, err := saga.CheckValue(v)
	if err == nil || strings.Count(err.Error(), "k") > 1 || len(err.Error()) > 100 {
		t.Fatalf("err %q, want one short message", err)
	}
}

func TestHugeCELResultFailsTheStep(t *testing.T) {
	t.Parallel()
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

func TestInputSizeIsTheJSONTheUserSent(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, "saga: s\ninput: {s: string}\nsteps: [{id: a, action: x.y}]\n")
	if _, err := p.CheckInput(map[string]any{"s": strings.Repeat("<", 25000)}); err != nil {
		t.Fatalf("25,000 '<' (25 kB as JSON) refused: %v", err)
	}
}

func TestLibraryCallsCannotBuildHugeValues(t *testing.T) {
	// Not parallel: it measures the process's allocations.
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

func TestGuardedLibraryCallsStillWork(t *testing.T) {
	t.Parallel()
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

func TestFailedSetWritesNothingWhenMeasured(t *testing.T) {
	t.Parallel()
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

// A callback step whose output is kept with its completion (its var is
// written by another step too) fails with StateTooLarge when the token's
// output does not fit, and its compensation reads the action's own
// output, whatever it was ("pending", or null): never the output of the
// completion the saga refused (30 KiB here).
func TestCallbackOutputTooLargeLeavesTheActionsOutputForItsCompensation(t *testing.T) {
	t.Parallel()
	for _, immediate := range []any{"pending", nil} {
		r := newTextRig(t, `saga: big
steps:
  - id: load
    action: p.load
    out: blob
  - id: charge
    action: p.charge
    callback: {timeout: 1h}
    out: payment
    compensate: {action: p.refund, with: {payment: "${vars.payment}"}}
  - id: later
    await: {signal: go, timeout: 1h}
  - id: other
    set: {payment: "x"}
`)
		ctx := context.Background()
		var token string
		var refunds []any
		r.reg.Register("p.load", func(ctx context.Context, c saga.Call) (any, error) { return strings.Repeat("b", 285<<10), nil })
		r.reg.Register("p.charge", func(ctx context.Context, c saga.Call) (any, error) { token = c.CallbackToken; return immediate, nil })
		r.reg.Register("p.refund", func(ctx context.Context, c saga.Call) (any, error) {
			refunds = append(refunds, c.Input.(map[string]any)["payment"])
			return nil, nil
		})
		r.start("b-1", nil)
		r.drain()
		d, err := r.coord.CompleteCallback(ctx, token, strings.Repeat("c", 30<<10))
		if err != nil || d.Receipt != saga.ReceiptApplied || d.State.Failure == nil || d.State.Failure.Type != "StateTooLarge" {
			t.Fatalf("immediate output %v: the completion: %+v %v", immediate, d, err)
		}
		r.drain()
		st := r.get("b-1")
		if st.Status != durable.StatusCompensated || len(refunds) != 1 {
			t.Fatalf("immediate output %v: %s, refunds %d", immediate, st.Status, len(refunds))
		}
		if got, _ := refunds[0].(string); refunds[0] != immediate {
			t.Errorf("action returned %v: its compensation read %d bytes of the refused completion, not the action's output", immediate, len(got))
		}
	}
}
