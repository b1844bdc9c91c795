package saga_test

import (
	"testing"

	"github.com/lambdasaga/lambdasaga/lang"
	"github.com/lambdasaga/lambdasaga/saga"
)

// A foreach may iterate lang.MaxForeachItems elements, and its list may
// be computed. CEL's runtime cost tracking takes time quadratic in the
// elements a comprehension walks; the evaluation's deadline scales with
// the data the expression reads, so the largest list a foreach takes
// can be built by an expression, while the cost limit still bounds the
// work.
func TestForeachOverTheLargestComputedList(t *testing.T) {
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
`, saga.Options{})
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
