package cost_test

import (
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/cost"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A saga that forks is priced with the walk that expires its tree once it
// has ended: one UpdateItem of ttl per child run and per fork record (1
// write unit each for small items), its message, and its reads (the root,
// each fork record, each child that can fork, and that child's own
// message's reads of itself, the root and its record).
func TestFinishedTreeExpiryIsPriced(t *testing.T) {
	plan, err := saga.Compile("tree.yaml", []byte(`saga: tree
input: {items: list}
steps:
  - id: each
    foreach: "${input.items}"
    concurrency: 2
    steps:
      - id: both
        parallel:
          - steps: [{id: left, action: svc.left, compensate: {action: svc.left_undo}}]
          - steps: [{id: right, action: svc.right}]
`), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"items": []any{"a", "b", "c"}}
	s, err := cost.Walk(plan, cost.Params{Input: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 3 iterations, 6 branches, 1 + 3 fork records; the root's message
	// and one per iteration. Reads: each message's saga, its ancestors
	// and its fork records, and every child (for its objects and forks).
	if s.Expires != 3+6+4 || s.ExpireMessages != 4 || s.ExpireReads != (1+1+3)+3*(1+1+1)+6 {
		t.Fatalf("expires %d, messages %d, reads %d", s.Expires, s.ExpireMessages, s.ExpireReads)
	}
	// A saga without forks is priced as before.
	flat, err := cost.Walk(linearPlan(t, 3), cost.Params{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if flat.Expires != 0 || flat.ExpireMessages != 0 || flat.ExpireReads != 0 {
		t.Fatalf("a saga without forks: %+v", flat)
	}
}
