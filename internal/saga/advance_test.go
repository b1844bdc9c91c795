package saga_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func TestAdvanceOrderSaga(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	tests := []struct {
		name    string
		amount  float64
		act     behaviour
		status  durable.Status
		trace   string
		failure string // step and type of the failure, if any
	}{
		{
			name: "success", amount: 120.5, act: failing(), status: durable.StatusSucceeded,
			trace: "reserve:started reserve:completed route:completed charge:started charge:completed check:completed done:completed",
		},
		{
			name: "large order goes through review", amount: 5000, act: failing(), status: durable.StatusSucceeded,
			trace: "reserve:started reserve:completed route:completed review:completed charge:started charge:completed check:completed done:completed",
		},
		{
			name: "first action fails: nothing to compensate", amount: 1, act: failing("reserve"), status: durable.StatusCompensated,
			trace: "reserve:started reserve:failed", failure: "reserve Declined",
		},
		{
			name: "charge fails: reserve is released", amount: 1, act: failing("charge"), status: durable.StatusCompensated,
			trace:   "reserve:started reserve:completed route:completed charge:started charge:failed reserve.compensate:compensated",
			failure: "charge Declined",
		},
		{
			name: "assert fails: charge refunded, then reserve released", amount: 1,
			act: func(c saga.Call) (any, error) {
				return map[string]any{"id": c.Step + "-1", "status": "pending"}, nil
			},
			status:  durable.StatusCompensated,
			trace:   "reserve:started reserve:completed route:completed charge:started charge:completed check:failed charge.compensate:compensated reserve.compensate:compensated",
			failure: "check AssertionFailed",
		},
		{
			name: "refund fails for good: parked", amount: 1,
			act: func(c saga.Call) (any, error) {
				if c.Step == "check" || (c.Step == "charge" && c.Compensation) {
					return nil, saga.Permanent(errors.New("bank down"))
				}
				return map[string]any{"id": "x", "status": "pending"}, nil
			},
			status:  durable.StatusCompensationFailed,
			trace:   "reserve:started reserve:completed route:completed charge:started charge:completed check:failed charge.compensate:compensation_failed",
			failure: "check AssertionFailed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := drive(t, p, orderIn(tt.amount), tt.act)
			if r.st.Status != tt.status {
				t.Errorf("status = %s, want %s (failure %v)", r.st.Status, tt.status, r.st.Failure)
			}
			if got := join(r.trace); got != tt.trace {
				t.Errorf("trace:\n got %s\nwant %s", got, tt.trace)
			}
			got := ""
			if r.st.Failure != nil {
				got = r.st.Failure.Step + " " + r.st.Failure.Type
			}
			if got != tt.failure {
				t.Errorf("failure = %q, want %q", got, tt.failure)
			}
		})
	}
}

func TestAdvanceSucceedOutput(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	r := drive(t, p, orderIn(10), failing())
	out, ok := r.st.Output.(map[string]any)
	if !ok || out["order"] != "o-1" || out["payment"] != "charge-1" {
		t.Fatalf("output = %#v", r.st.Output)
	}
	if len(r.st.Stack) != 2 || len(r.st.Cursors) != 0 || len(r.st.Outbox) != 0 {
		t.Fatalf("stack %v cursors %v outbox %v", r.st.Stack, r.st.Cursors, r.st.Outbox)
	}
}

func TestAdvanceCompensationInputAtCompensationTime(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	r := drive(t, p, orderIn(1), failing("charge"))
	last := r.calls[len(r.calls)-1]
	if !last.Compensation || last.Action != "inventory.release" {
		t.Fatalf("last call = %+v", last)
	}
	in := last.Input.(map[string]any)
	if in["reservation_id"] != "reserve-1" {
		t.Fatalf("release input = %v, want the reservation id from reserve's out", in)
	}
}

func TestAdvanceRetries(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `
saga: retry
steps:
  - id: flaky
    action: svc.flaky
    retry: {attempts: 4, backoff: 1s, max_backoff: 3s, jitter: false}
    compensate: {action: svc.undo}
  - id: later
    action: svc.later
`)
	t.Run("succeeds on the third attempt", func(t *testing.T) {
		r := drive(t, p, nil, func(c saga.Call) (any, error) {
			if c.Step == "flaky" && c.Attempt < 3 {
				return nil, errors.New("timeout talking to svc")
			}
			return "ok", nil
		})
		if r.st.Status != durable.StatusSucceeded {
			t.Fatalf("status %s", r.st.Status)
		}
		want := "flaky:started flaky:retrying flaky:retrying flaky:completed later:started later:completed"
		if got := join(r.trace); got != want {
			t.Fatalf("trace %s\nwant  %s", got, want)
		}
		if r.delays[0] != time.Second || r.delays[1] != 2*time.Second {
			t.Fatalf("delays %v", r.delays)
		}
		// Every attempt of one visit shares the idempotency key.
		if r.calls[0].IdempotencyKey != r.calls[2].IdempotencyKey || r.calls[0].IdempotencyKey == r.calls[3].IdempotencyKey {
			t.Fatalf("keys %s %s %s", r.calls[0].IdempotencyKey, r.calls[2].IdempotencyKey, r.calls[3].IdempotencyKey)
		}
		if r.calls[2].Attempt != 3 {
			t.Fatalf("attempt %d", r.calls[2].Attempt)
		}
		// The retry message carries the delay and the new version.
		msg := r.outboxes[1][0]
		if msg.Delay != time.Second || msg.Attempt != 2 || msg.Version != 2 || msg.Queue != durable.QueueAdvance {
			t.Fatalf("retry message %+v", msg)
		}
	})
	t.Run("exhausted attempts compensate", func(t *testing.T) {
		r := drive(t, p, nil, func(c saga.Call) (any, error) {
			if c.Step == "later" {
				return nil, errors.New("still broken")
			}
			return "ok", nil
		})
		want := "flaky:started flaky:completed later:started later:retrying later:retrying later:failed flaky.compensate:compensated"
		if got := join(r.trace); got != want || r.st.Status != durable.StatusCompensated {
			t.Fatalf("%s: %s\nwant  %s", r.st.Status, got, want)
		}
		if r.st.Failure.Type != lang.ErrorTypeGeneric || r.st.Failure.Step != "later" {
			t.Fatalf("failure %+v", r.st.Failure)
		}
	})
	t.Run("backoff is capped", func(t *testing.T) {
		r := drive(t, p, nil, func(c saga.Call) (any, error) {
			if c.Step == "flaky" {
				return nil, errors.New("no")
			}
			return "ok", nil
		})
		want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
		if len(r.delays) != 3 || r.delays[0] != want[0] || r.delays[1] != want[1] || r.delays[2] != want[2] {
			t.Fatalf("delays %v, want %v", r.delays, want)
		}
	})
	t.Run("permanent error types skip retries", func(t *testing.T) {
		p := mustCompile(t, `
saga: perm
steps:
  - id: pay
    action: pay
    retry: {attempts: 5, permanent: [CardDeclined]}
`)
		r := drive(t, p, nil, func(c saga.Call) (any, error) { return nil, saga.NewError("CardDeclined", "no funds") })
		if got := join(r.trace); got != "pay:started pay:failed" {
			t.Fatalf("trace %s", got)
		}
	})
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	pol := lang.RetryPolicy{Attempts: 10, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	tests := []struct {
		attempt int
		jitter  bool
		rand    float64
		want    time.Duration
	}{
		{2, false, 0, 100 * time.Millisecond},
		{3, false, 0, 200 * time.Millisecond},
		{4, false, 0, 400 * time.Millisecond},
		{5, false, 0, 800 * time.Millisecond},
		{6, false, 0, time.Second},
		{60, false, 0, time.Second},
		{2, true, 0, 50 * time.Millisecond},
		{2, true, 0.5, 75 * time.Millisecond},
		{6, true, 0.999999, 999999500 * time.Nanosecond},
	}
	for _, tt := range tests {
		pol.Jitter = tt.jitter
		if got := saga.Backoff(pol, tt.attempt, tt.rand); got != tt.want {
			t.Errorf("Backoff(attempt %d, jitter %v, rand %v) = %v, want %v", tt.attempt, tt.jitter, tt.rand, got, tt.want)
		}
	}
}

func TestAdvanceStepKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		def    string
		input  map[string]any
		status durable.Status
		trace  string
		output any
	}{
		{
			name: "set keeps CEL types and sees earlier assignments",
			def: `
saga: s
input: {n: int}
steps:
  - id: calc
    set: {double: "${input.n * 2}", label: "n=${input.n}", more: "${vars.double + 1}", lit: {a: [1, 2.5, true, null]}}
  - id: out
    succeed: {output: "${[vars.double, vars.label, vars.more, vars.lit]}"}
`,
			input: map[string]any{"n": 21}, status: durable.StatusSucceeded,
			trace:  "calc:completed out:completed",
			output: []any{int64(42), "n=21", int64(43), map[string]any{"a": []any{int64(1), 2.5, true, nil}}},
		},
		{
			name: "switch falls through without a default",
			def: `
saga: s
input: {n: int}
steps:
  - id: pick
    switch: [{if: "input.n > 10", next: big}]
  - id: small
    succeed: {output: small}
  - id: big
    succeed: {output: big}
`,
			input: map[string]any{"n": 1}, status: durable.StatusSucceeded, trace: "pick:completed small:completed", output: "small",
		},
		{
			name: "fail step compensates with its error",
			def: `
saga: s
steps:
  - id: a
    action: x
    compensate: {action: undo}
  - id: stop
    fail: {error: OutOfStock, message: nothing left}
`,
			status: durable.StatusCompensated, trace: "a:started a:completed stop:failed a.compensate:compensated",
		},
		{
			name: "catch routes an assert failure",
			def: `
saga: s
input: {n: int}
steps:
  - id: check
    assert: {if: "input.n > 0", error: NotPositive}
    catch: [{errors: [NotPositive], next: fallback}]
  - id: fine
    succeed: {output: fine}
  - id: fallback
    succeed: {output: fallback}
`,
			input: map[string]any{"n": -1}, status: durable.StatusSucceeded, trace: "check:caught fallback:completed", output: "fallback",
		},
		{
			name: "catch routes an action failure after retries",
			def: `
saga: s
steps:
  - id: pay
    action: pay
    retry: {attempts: 2, backoff: 1s}
    catch: [{errors: ["*"], next: manual}]
  - id: done
    succeed: {output: paid}
  - id: manual
    set: {review: "${true}"}
`,
			status: durable.StatusSucceeded, trace: "pay:started pay:retrying pay:caught manual:completed",
			output: map[string]any{"review": true},
		},
		{
			name: "expression error at run time fails the step",
			def: `
saga: s
steps:
  - id: a
    action: a
    out: r
    compensate: {action: undo}
  - id: bad
    set: {x: "${vars.r.missing + 1}"}
`,
			status: durable.StatusCompensated, trace: "a:started a:completed bad:failed a.compensate:compensated",
		},
		{
			name: "end of the list succeeds with vars",
			def: `
saga: s
steps:
  - id: a
    set: {x: 1}
`,
			status: durable.StatusSucceeded, trace: "a:completed", output: map[string]any{"x": int64(1)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustCompile(t, tt.def)
			r := drive(t, p, tt.input, func(c saga.Call) (any, error) {
				if c.Step == "pay" {
					return nil, errors.New("down")
				}
				return map[string]any{"id": 1}, nil
			})
			if r.st.Status != tt.status {
				t.Fatalf("status %s, want %s (failure %v)", r.st.Status, tt.status, r.st.Failure)
			}
			if got := join(r.trace); got != tt.trace {
				t.Fatalf("trace %s\nwant  %s", got, tt.trace)
			}
			if tt.output != nil && !equalValues(r.st.Output, tt.output) {
				t.Fatalf("output %#v\nwant   %#v", r.st.Output, tt.output)
			}
		})
	}
}

func TestAdvanceRuntimeGuards(t *testing.T) {
	t.Parallel()
	t.Run("runaway expression hits the cost limit", func(t *testing.T) {
		p, err := saga.Compile("t.yaml", []byte(`
saga: s
input: {xs: list}
steps:
  - id: spin
    set: {n: "${input.xs.map(a, input.xs.map(b, input.xs.map(c, a)))}"}
`), saga.Options{CostLimit: 10_000})
		if err != nil {
			t.Fatal(err)
		}
		xs := make([]any, 100)
		for i := range xs {
			xs[i] = int64(i)
		}
		r := drive(t, p, map[string]any{"xs": xs}, nil)
		if r.st.Status != durable.StatusCompensated || r.st.Failure.Type != lang.ErrorTypeExpression {
			t.Fatalf("status %s failure %+v", r.st.Status, r.st.Failure)
		}
		if !contains(r.st.Failure.Message, "cost limit") {
			t.Fatalf("message %q does not say cost limit", r.st.Failure.Message)
		}
	})
	t.Run("deadline compensates at the next step", func(t *testing.T) {
		p := mustCompile(t, `
saga: s
timeout: 1s
steps:
  - id: a
    action: a
    compensate: {action: undo}
  - id: b
    action: b
`)
		r := drive(t, p, nil, nil) // each call advances the clock by a second
		if r.st.Status != durable.StatusCompensated || r.st.Failure.Type != lang.ErrorTypeDeadline || r.st.Failure.Step != "b" {
			t.Fatalf("status %s failure %+v", r.st.Status, r.st.Failure)
		}
		if got := join(r.trace); got != "a:started a:completed a.compensate:compensated" {
			t.Fatalf("trace %s", got)
		}
	})
}

func TestAdvanceCancelAndResume(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	st := &saga.State{}
	in, _ := p.CheckInput(orderIn(1))
	step := func(ev saga.Event) []durable.Message {
		t.Helper()
		ev.Now = t0
		if err := p.Advance(st, ev); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(st.Outbox)
	}
	step(saga.Event{Kind: saga.EventStart, SagaID: "c-1", Input: in})
	step(saga.Event{Kind: saga.EventResult, Output: map[string]any{"id": "r-1"}}) // reserve done, charge pending
	// The charge is pending and may be running: the cancel waits for its
	// outcome, sending its message again at the new version.
	res := step(saga.Event{Kind: saga.EventCancel})
	if st.Status != durable.StatusRunning || !st.CancelRequested || st.Failure != nil {
		t.Fatalf("after cancel: %s requested %v %+v", st.Status, st.CancelRequested, st.Failure)
	}
	if len(res) != 1 || res[0].Queue != durable.QueueAdvance || res[0].Step != "charge" || res[0].Version != st.Version {
		t.Fatalf("messages %+v", res)
	}
	// The charge went through: it is compensated with the rest, and no
	// later step runs.
	res = step(saga.Event{Kind: saga.EventResult, Output: map[string]any{"id": "p-1", "status": "captured"}})
	if st.Status != durable.StatusCompensating || st.Failure.Type != lang.ErrorTypeCancelled || st.CancelRequested {
		t.Fatalf("after the charge: %s %+v", st.Status, st.Failure)
	}
	if len(res) != 1 || res[0].Queue != durable.QueueCompensate || res[0].Step != "charge" {
		t.Fatalf("messages %+v", res)
	}
	if err := p.Advance(st, saga.Event{Kind: saga.EventCancel, Now: t0}); !errors.Is(err, saga.ErrInvalidEvent) {
		t.Fatalf("second cancel: %v", err)
	}
	step(saga.Event{Kind: saga.EventResult}) // refunded
	step(saga.Event{Kind: saga.EventResult, Err: saga.Permanent(errors.New("warehouse offline"))})
	if st.Status != durable.StatusCompensationFailed || st.CompensationError.Step != "reserve" {
		t.Fatalf("after failed release: %s %+v", st.Status, st.CompensationError)
	}
	version := st.Version
	res = step(saga.Event{Kind: saga.EventResume})
	if st.Status != durable.StatusCompensating || len(res) != 1 || res[0].Attempt != 1 || st.Version != version+1 {
		t.Fatalf("after resume: %s %+v", st.Status, res)
	}
	call, err := p.Call(st, t0)
	if err != nil || call.Action != "inventory.release" || call.IdempotencyKey != "c-1/reserve.compensate/1" {
		t.Fatalf("call %+v %v", call, err)
	}
	step(saga.Event{Kind: saga.EventResult})
	if st.Status != durable.StatusCompensated || len(st.Stack) != 0 {
		t.Fatalf("final %s stack %v", st.Status, st.Stack)
	}
	if err := p.Advance(st, saga.Event{Kind: saga.EventResume, Now: t0}); !errors.Is(err, saga.ErrInvalidEvent) {
		t.Fatalf("resume of a compensated saga: %v", err)
	}
}

func TestAdvanceLoopKeepsEachVisitsOutput(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `
saga: loop
input: {n: int}
steps:
  - id: book
    action: book
    out: booking
    compensate: {action: cancel, with: {id: "${vars.booking.id}"}}
  - id: count
    set: {done: "${has(vars.done) ? vars.done + 1 : 1}"}
  - id: again
    switch: [{if: "vars.done < input.n", next: book}]
  - id: stop
    fail: {error: Stop}
`)
	n := 0
	r := drive(t, p, map[string]any{"n": 3}, func(c saga.Call) (any, error) {
		if c.Compensation {
			return nil, nil
		}
		n++
		return map[string]any{"id": int64(n)}, nil
	})
	var undone []any
	keys := map[string]bool{}
	for _, c := range r.calls {
		keys[c.IdempotencyKey] = true
		if c.Compensation {
			undone = append(undone, c.Input.(map[string]any)["id"])
		}
	}
	if !equalValues(undone, []any{int64(3), int64(2), int64(1)}) {
		t.Fatalf("compensated bookings %v, want 3 2 1", undone)
	}
	if len(keys) != 6 {
		t.Fatalf("%d distinct idempotency keys for 6 calls", len(keys))
	}
}

func TestAdvanceRejectsEventsThatDoNotApply(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	other := mustCompile(t, "saga: other\nsteps: [{id: a, action: a}]")
	done := drive(t, p, orderIn(1), failing()).st
	tests := []struct {
		name string
		plan *saga.Plan
		st   *saga.State
		ev   saga.Event
	}{
		{"result for a finished saga", p, done, saga.Event{Kind: saga.EventResult}},
		{"start twice", p, done, saga.Event{Kind: saga.EventStart, SagaID: "x"}},
		{"start without id", p, &saga.State{}, saga.Event{Kind: saga.EventStart}},
		{"another definition", other, done, saga.Event{Kind: saga.EventCancel}},
		{"unknown kind", p, &saga.State{}, saga.Event{Kind: 99}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.st.Version
			if err := tt.plan.Advance(tt.st, tt.ev); !errors.Is(err, saga.ErrInvalidEvent) {
				t.Fatalf("err = %v, want ErrInvalidEvent", err)
			}
			if tt.st.Version != before {
				t.Fatal("state changed on a rejected event")
			}
		})
	}
}

// CheckValue returns plain values as they are: an action output of nested
// maps and lists is not copied when nothing in it needs widening.
func TestCheckValueDoesNotCopyPlainValues(t *testing.T) {
	out := map[string]any{"id": "p-1", "nested": map[string]any{"n": int64(1)}, "list": []any{"a", map[string]any{}}}
	got, err := saga.CheckValue(out)
	if err != nil {
		t.Fatal(err)
	}
	got.(map[string]any)["marker"] = true
	if out["marker"] != true {
		t.Fatal("a plain value was copied")
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = saga.CheckValue(out) }); n != 0 {
		t.Fatalf("%v allocations checking a plain value", n)
	}
	// A value that needs widening deep down is copied along its path, never changed in place.
	in := map[string]any{"a": map[string]any{"n": 3}, "b": "x"}
	w, err := saga.CheckValue(in)
	if err != nil {
		t.Fatal(err)
	}
	if w.(map[string]any)["a"].(map[string]any)["n"] != int64(3) || in["a"].(map[string]any)["n"] != 3 {
		t.Fatalf("widened %#v, original %#v", w, in)
	}
}

func TestDryRun(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	in, _ := p.CheckInput(orderIn(10))
	var calls []string
	st, err := p.DryRun(saga.DryRunParams{
		Input: in,
		Act: func(c saga.Call) (any, error) {
			if c.Step == "charge" && !c.Compensation {
				return nil, saga.Permanent(errors.New("declined"))
			}
			return map[string]any{"id": c.Step}, nil
		},
		OnCall: func(c saga.Call) {
			name := c.Step
			if c.Compensation {
				name += ".compensate"
			}
			calls = append(calls, name)
		},
	})
	if err != nil || st.Status != durable.StatusCompensated || join(calls) != "reserve charge reserve.compensate" {
		t.Fatalf("%v %s %v", err, st.Status, calls)
	}
	// Without Act every call succeeds with its input as output. The echoed
	// payment has no status, so check fails; refunding it needs
	// vars.payment.id, which the echo lacks: building that call fails, as a
	// permanent failure of the compensation, and the saga parks.
	st, err = p.DryRun(saga.DryRunParams{Input: in})
	if err != nil || st.Status != durable.StatusCompensationFailed || st.Failure.Step != "check" || st.CompensationError.Step != "charge" {
		t.Fatalf("%v %s %+v %+v", err, st.Status, st.Failure, st.CompensationError)
	}
}

// A set step that fails partway writes nothing, whether or not the
// transition is measured: a compensation must not read a value written by
// a step that failed (it read 'WRONG' when StoreLimit was 0).
func TestFailedSetWritesNothing(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `saga: x
input: {s: string}
steps:
  - id: init
    set: {target: "${'good'}"}
  - id: book
    action: b
    compensate: {action: unbook, with: {target: "${vars.target}"}}
  - id: s
    set: {target: "${'WRONG'}", n: "${int(input.s)}"}
`)
	for _, limit := range []int{0, saga.MaxStateBytes} {
		st := &saga.State{}
		in, _ := p.CheckInput(map[string]any{"s": "zz"})
		if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s", Input: in, StoreLimit: limit}); err != nil {
			t.Fatal(err)
		}
		if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: map[string]any{}, StoreLimit: limit}); err != nil {
			t.Fatal(err)
		}
		call, err := p.Call(st, t0)
		if err != nil || !call.Compensation || call.Input.(map[string]any)["target"] != "good" {
			t.Errorf("StoreLimit %d: compensation call %+v (%v), want it to read target=good", limit, call, err)
		}
	}
}

// StatusSince is the time of the transition that set the status, kept by
// the transitions that keep it, and only grows: a worker whose clock is
// behind moves it a nanosecond past the one before, so that a saga that
// changes status moves ahead of any listing's cursor that saw it.
func TestAdvanceStatusSince(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	st := &saga.State{}
	in, _ := p.CheckInput(orderIn(1))
	at := func(now time.Time, ev saga.Event) {
		t.Helper()
		ev.Now = now
		if err := p.Advance(st, ev); err != nil {
			t.Fatal(err)
		}
	}
	at(t0, saga.Event{Kind: saga.EventStart, SagaID: "c-1", Input: in})
	if !st.StatusSince.Equal(t0) {
		t.Fatalf("after the start: since %s", st.StatusSince)
	}
	at(t0.Add(time.Minute), saga.Event{Kind: saga.EventResult, Output: map[string]any{"id": "r-1"}})
	if st.Status != durable.StatusRunning || !st.StatusSince.Equal(t0) {
		t.Fatalf("a step that keeps running: %s since %s, want since %s", st.Status, st.StatusSince, t0)
	}
	// The charge is not captured (the assert after it fails), on a worker
	// whose clock is an hour behind.
	at(t0.Add(-time.Hour), saga.Event{Kind: saga.EventResult, Output: map[string]any{"id": "p-1", "status": "declined"}})
	if st.Status != durable.StatusCompensating || !st.StatusSince.Equal(t0.Add(time.Nanosecond)) {
		t.Fatalf("a status change on a clock behind: %s since %s, want %s", st.Status, st.StatusSince, t0.Add(time.Nanosecond))
	}
	// The refund keeps it compensating; the release ends it, on a clock
	// that is right: its own time.
	at(t0.Add(time.Minute), saga.Event{Kind: saga.EventResult})
	if st.Status != durable.StatusCompensating || !st.StatusSince.Equal(t0.Add(time.Nanosecond)) {
		t.Fatalf("after the refund: %s since %s", st.Status, st.StatusSince)
	}
	at(t0.Add(2*time.Minute), saga.Event{Kind: saga.EventResult})
	if st.Status != durable.StatusCompensated || !st.StatusSince.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("compensated: %s since %s", st.Status, st.StatusSince)
	}
}

// A transition replayed to measure its state (Event.StoreLimit) leaves a
// state within the limit whenever the saga keeps running: the time it
// entered its status counts too. A state stored before that field existed
// gains it in its next transition, a few bytes the measure must see.
func TestStoreLimitCountsStatusSince(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, "saga: s\nsteps:\n  - {id: first, action: a, out: o, compensate: {action: undo}}\n  - {id: second, action: b}\n")
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1"}); err != nil {
		t.Fatal(err)
	}
	st.StatusSince = time.Time{} // as stored before the field existed
	old, _ := st.MarshalBinary()
	result := saga.Event{Kind: saga.EventResult, Now: t0.Add(time.Minute), Output: map[string]any{"v": "x"}}
	var free saga.State
	_ = free.UnmarshalBinary(old)
	if err := p.Advance(&free, result); err != nil || free.Status != durable.StatusRunning || free.StatusSince.IsZero() {
		t.Fatalf("without a limit: %s since %s, %v", free.Status, free.StatusSince, err)
	}
	after, _ := free.MarshalBinary()
	var tight saga.State
	_ = tight.UnmarshalBinary(old)
	result.StoreLimit = len(after) - 1
	if err := p.Advance(&tight, result); err != nil {
		t.Fatal(err)
	}
	b, _ := tight.MarshalBinary()
	if tight.Status == durable.StatusRunning && len(b) > result.StoreLimit {
		t.Fatalf("running in %d bytes, over the limit of %d it was measured against", len(b), result.StoreLimit)
	}
	if tight.Status != durable.StatusCompensating || tight.Failure == nil || tight.Failure.Type != lang.ErrorTypeStateTooLarge {
		t.Fatalf("%s %+v; want compensating with StateTooLarge", tight.Status, tight.Failure)
	}
}
