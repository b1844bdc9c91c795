package saga_test

import (
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/saga"
)

// A comprehension over a list of 10,000 elements (what a foreach over a
// computed list evaluates) runs in time linear in the list: the work of
// an expression is counted by the saga, not by CEL's runtime cost
// tracker, whose bookkeeping grows with the square of a comprehension's
// length (past the evaluation deadline at 10,000 elements).
func TestComprehensionOverTenThousandElementsRuns(t *testing.T) {
	p, err := saga.Compile("t.yaml", []byte(`
saga: cart
steps:
  - id: load
    action: cart.load
    out: cart
  - id: pick
    set: {skus: "${vars.cart.filter(x, x.qty > 0).map(x, x.sku)}"}
  - id: each
    foreach: "${vars.cart.filter(x, x.qty > 0).map(x, x.sku)}"
    concurrency: 100
    steps:
      - {id: ship, action: ship.send, with: {sku: "${item}"}}
`), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cart := make([]any, 10_000)
	for i := range cart {
		cart[i] = map[string]any{"sku": "s", "qty": int64(1 + i%3)}
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1"}); err != nil {
		t.Fatal(err)
	}
	// load returns the cart: pick and the foreach run in the same transition.
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: cart}); err != nil {
		t.Fatal(err)
	}
	if st.Failure != nil {
		t.Fatalf("failure: %+v", st.Failure)
	}
	if cur, ok := st.Pending(); !ok || !cur.Fork || cur.Children != 10_000 || st.Status != durable.StatusWaiting {
		t.Fatalf("status %s, pending %+v: want the foreach's 10,000 children launched", st.Status, cur)
	}
	if n := len(st.Vars["skus"].([]any)); n != 10_000 {
		t.Fatalf("skus has %d elements", n)
	}
}

// Once an evaluation has made as many calls as its limit allows, it fails
// with the cost limit even where CEL would absorb the calls' errors (an
// exists() is true if any element's test is, error or not): a spent
// budget never yields a result.
func TestSpentCostLimitFailsTheExpressionWhateverAbsorbsErrors(t *testing.T) {
	p, err := saga.Compile("t.yaml", []byte(`
saga: s
input: {xs: list}
steps:
  - id: spin
    set: {hit: "${input.xs.exists(a, input.xs.exists(b, a + b == 0 - 1)) || true}"}
`), saga.Options{CostLimit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]any, 1000)
	for i := range xs {
		xs[i] = int64(i)
	}
	r := drive(t, p, map[string]any{"xs": xs}, nil)
	if r.st.Status != durable.StatusCompensated || r.st.Failure == nil || !contains(r.st.Failure.Message, "cost limit") {
		t.Fatalf("status %s failure %+v: want the cost limit", r.st.Status, r.st.Failure)
	}
}
