package saga_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A secret given to a child saga's field not declared secret is refused
// (docs/DEFINITIONS.md, "Secrets: what is hidden where"); the same secret
// copied into a var first, or given as a foreach's item, must not reach
// the child's status, history and console either. Either way of keeping
// it hidden passes: refusing such a with at compile time, or masking the
// parent's secrets in the child's shown input.
func TestChildSagaMasksAParentSecretPassedThroughAVarOrItem(t *testing.T) {
	pay := "saga: p\ninput: {card: string}\nsteps: [{id: b, action: w}]\n"
	for name, tc := range map[string]struct {
		main  string
		input map[string]any
		depth int // forks from the saga to the child saga
	}{
		"through a var": {`saga: m
input: {card: secret string}
steps:
  - id: keep
    set: {c: "${input.card}"}
  - id: a
    saga: pay.yaml
    with: {card: "${vars.c}"}
`, map[string]any{"card": card}, 1},
		"as a foreach item": {`saga: m
input: {cards: secret list}
steps:
  - id: each
    foreach: "${input.cards}"
    steps:
      - id: a
        saga: pay.yaml
        with: {card: "${item}"}
`, map[string]any{"cards": []any{card}}, 2},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := compileFiles(map[string]string{"main.yaml": tc.main, "pay.yaml": pay}, forks)
			if err != nil {
				return // refused: the secret cannot reach the child
			}
			in, err := p.CheckInput(tc.input)
			if err != nil {
				t.Fatal(err)
			}
			st := &saga.State{}
			if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1", Input: in}); err != nil {
				t.Fatal(err)
			}
			for i := range tc.depth {
				cp, cs, err := p.Launch(st, 0)
				if err != nil {
					t.Fatal(err)
				}
				child := &saga.State{}
				if err := cp.Advance(child, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: fmt.Sprintf("s-1.c%d", i), Input: cs.Input, Child: cs}); err != nil {
					t.Fatal(err)
				}
				p, st = cp, child
			}
			if p.Name() != "p" {
				t.Fatalf("reached saga %s, not the child saga p", p.Name())
			}
			shown := p.Redactor(st).State(st)
			if got := fmt.Sprint(shown.Input); strings.Contains(got, card) {
				t.Errorf("the child saga's shown input %s holds its parent's secret card", got)
			}
		})
	}
}
