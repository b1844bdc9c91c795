package saga_test

import (
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A foreach may iterate lang.MaxForeachItems elements, and its list may
// be computed: the expression's cost stays far under the cost limit and
// its result within the state's limits, so the fork starts with every
// child. (Its time against the evaluation deadline, which scales with the
// data read, TestEvalDeadlineScalesWithTheDataRead, is a benchmark's to
// measure: BenchmarkForeachComputedList, bench/README.md; here the
// deadline is a minute, so that a loaded machine cannot fail the test.)
func TestForeachOverTheLargestComputedList(t *testing.T) {
	t.Parallel()
	p := mustCompileOpts(t, `
saga: wide
input: {items: list}
steps:
  - id: each
    foreach: "${input.items.map(x, x * 2)}"
    as: it
    steps:
      - id: ship
        action: ship.one
        with: {n: "${it}"}
`, saga.Options{EvalTimeout: time.Minute})
	items := make([]any, lang.MaxForeachItems)
	for i := range items {
		items[i] = int64(i)
	}
	in, err := p.CheckInput(map[string]any{"items": items})
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, SagaID: "w-1", Input: in, Now: t0}); err != nil {
		t.Fatal(err)
	}
	cur, ok := st.Pending()
	if st.Failure != nil || !ok || !cur.Fork || cur.Children != lang.MaxForeachItems {
		t.Fatalf("status %s, failure %+v, cursor %+v: want the fork of %d children", st.Status, st.Failure, cur, lang.MaxForeachItems)
	}
}

// BenchmarkForeachComputedList times the evaluation of a foreach list of
// lang.MaxForeachItems built by an expression (CEL's tracked evaluation,
// quadratic in the elements), against its deadline: 100 ms scaled 25
// times, 2.5 s.
func BenchmarkForeachComputedList(b *testing.B) {
	p := mustCompileOpts(b, `
saga: wide
input: {items: list}
steps:
  - id: each
    foreach: "${input.items.map(x, x * 2)}"
    as: it
    steps:
      - id: ship
        action: ship.one
`, saga.Options{})
	items := make([]any, lang.MaxForeachItems)
	for i := range items {
		items[i] = int64(i)
	}
	in, err := p.CheckInput(map[string]any{"items": items})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		st := &saga.State{}
		if err := p.Advance(st, saga.Event{Kind: saga.EventStart, SagaID: "w-1", Input: in, Now: t0}); err != nil {
			b.Fatal(err)
		}
		if st.Failure != nil {
			b.Fatalf("failure %+v", st.Failure)
		}
	}
}
