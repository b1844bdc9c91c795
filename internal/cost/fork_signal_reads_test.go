package cost_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/cost"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A fork whose children await signals has its launcher read the parent
// again after each child's create (the signals kept for that child
// meanwhile): one read more per child, priced with the rest.
func TestForkWhoseChildrenAwaitReadsTheParentOncePerChild(t *testing.T) {
	const src = `
saga: batch
input: {items: list}
steps:
  - id: each
    foreach: "${input.items}"
    steps:
      - {id: BODY}
      - {id: ship, action: svc.ship}
`
	walk := func(body string) *cost.Saga {
		t.Helper()
		plan, err := saga.Compile("b.yaml", []byte(strings.Replace(src, "{id: BODY}", body, 1)), saga.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := cost.Walk(plan, cost.Params{Input: map[string]any{"items": []any{"a", "b", "c"}}, SignalsFirst: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	awaits := walk("{id: wait, await: {signal: approved, timeout: 1h}}")
	plain := walk("{id: wait, wait: {for: 1s}}")
	if awaits.LaunchReads != 3 || plain.LaunchReads != 0 {
		t.Fatalf("launch reads %d with awaits, %d without; want 3 and 0", awaits.LaunchReads, plain.LaunchReads)
	}
}
