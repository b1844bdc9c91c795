package saga

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

var benchNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// linearSetSaga is a saga of n steps, each setting one literal var.
func linearSetSaga(n int) string {
	var b strings.Builder
	b.WriteString("saga: linear\nsteps:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {id: s%d, set: {v%d: %d}}\n", i, i, i)
	}
	return b.String()
}

func mustPlan(tb testing.TB, src string) *Plan {
	tb.Helper()
	p, err := Compile("bench.yaml", []byte(src), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// advanceWhole runs a whole saga of pure steps with one Advance call.
func advanceWhole(p *Plan, st *State) {
	*st = State{Outbox: st.Outbox[:0], Cursors: st.Cursors[:0]}
	if err := p.Advance(st, Event{Kind: EventStart, Now: benchNow, SagaID: "bench-1"}); err != nil || st.Status != durable.StatusSucceeded {
		panic(fmt.Sprintf("advance: %v %s", err, st.Status))
	}
}

func BenchmarkAdvance(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("set_steps_%d", n), func(b *testing.B) {
			p := mustPlan(b, linearSetSaga(n))
			st := &State{}
			b.ReportAllocs()
			for b.Loop() {
				advanceWhole(p, st)
			}
		})
	}
}

// stepBench is one pure step, followed by an action so the run stops there.
type stepBench struct {
	name, step string
	input      map[string]any
}

func list100() []any {
	xs := make([]any, 100)
	for i := range xs {
		xs[i] = int64(i)
	}
	return xs
}

var stepBenches = []stepBench{
	{"set_cel", `{id: s, set: {sum: "${input.a + input.b + input.c}"}}`, map[string]any{"a": int64(1), "b": int64(2), "c": int64(3)}},
	{"map_100", `{id: s, set: {out: "${input.xs.map(x, x * 2)}"}}`, map[string]any{"xs": list100()}},
	{"filter_100", `{id: s, set: {out: "${input.xs.filter(x, x % 2 == 0)}"}}`, map[string]any{"xs": list100()}},
	{"switch", `{id: s, switch: [{if: "input.n > 100", next: a}, {if: "input.n > 10", next: a}, {default: a}]}`, map[string]any{"n": int64(5)}},
}

func (sb stepBench) setup(tb testing.TB) (*Plan, *runner) {
	p := mustPlan(tb, "saga: step\nsteps:\n  - "+sb.step+"\n  - {id: a, action: next}\n")
	st := &State{SagaID: "bench-1", Input: sb.input, Vars: map[string]any{}, Status: durable.StatusRunning}
	r := &runner{p: p, st: st, ev: Event{Kind: EventResult, Now: benchNow}}
	r.run(0) // warm: the var exists, the outbox and cursor slices have room
	return p, r
}

// once runs the step (and stops at the action after it).
func (r *runner) once() {
	r.st.Outbox = r.st.Outbox[:0]
	r.st.Seq = 0 // each run is the saga's first visit to the action (MaxVisits)
	r.run(0)
	if r.st.Status != durable.StatusRunning {
		panic(fmt.Sprintf("step failed: %v", r.st.Failure))
	}
}

func BenchmarkStep(b *testing.B) {
	for _, sb := range stepBenches {
		b.Run(sb.name, func(b *testing.B) {
			_, r := sb.setup(b)
			b.ReportAllocs()
			for b.Loop() {
				r.once()
			}
		})
	}
}

const celBenchExpr = "input.a + input.b + input.c"

func BenchmarkCEL(b *testing.B) {
	p := mustPlan(b, "saga: cel\nsteps: [{id: s, set: {x: 1}}]")
	env, err := newCELEnv(p.def)
	if err != nil {
		b.Fatal(err)
	}
	opts := Options{}.withDefaults()
	b.Run("compile", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, probs := compileExpr(env, celBenchExpr, opts); probs != nil {
				b.Fatal(probs)
			}
		}
	})
	b.Run("eval_cached", func(b *testing.B) {
		prg, _ := compileExpr(env, celBenchExpr, opts)
		act := &activation{st: &State{Input: map[string]any{"a": int64(1), "b": int64(2), "c": int64(3)}}}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := prg.eval(act); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchState is a realistic mid-saga state: the order saga after reserve.
func benchState() *State {
	return &State{
		SagaID: "0f8e6c1e-5b7a-4d1e-9a43-3c2b1a0e9f87", Name: "order", DefinitionHash: strings.Repeat("3f", 32),
		Status: durable.StatusRunning, Version: 3,
		Input:   map[string]any{"order_id": "o-1001", "amount": 120.5, "items": []any{"sku-1", "sku-2"}},
		Vars:    map[string]any{"reservation": map[string]any{"id": "r-77", "order_id": "o-1001", "items": []any{"sku-1", "sku-2"}}},
		Cursors: []Cursor{{Step: 3, Attempt: 1, Seq: 2}},
		Stack:   []Completion{{Step: 0, Seq: 1}},
		Outbox:  []durable.Message{{SagaID: "0f8e6c1e-5b7a-4d1e-9a43-3c2b1a0e9f87", Version: 3, Queue: durable.QueueAdvance, Step: "charge", Attempt: 1}},
		Seq:     2, CreatedAt: benchNow, UpdatedAt: benchNow.Add(time.Second), Deadline: benchNow.Add(24 * time.Hour),
	}
}

func BenchmarkState(b *testing.B) {
	st := benchState()
	buf, _ := st.MarshalBinary()
	b.Run("encode", func(b *testing.B) {
		out := make([]byte, 0, 1024)
		b.ReportAllocs()
		for b.Loop() {
			out, _ = st.AppendBinary(out[:0])
		}
		b.ReportMetric(float64(len(buf)), "bytes/state")
	})
	b.Run("decode", func(b *testing.B) {
		var got State
		b.ReportAllocs()
		for b.Loop() {
			if err := got.UnmarshalBinary(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
