package saga_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// The secrets a child saga or a branch inherits from its parent: given
// to a declared field, copied through a var, an item or a map key, they
// stay masked in the child.

// A secret given to a child saga's field not declared secret is refused
// (docs/DEFINITIONS.md, "Secrets: what is hidden where"); the same secret
// copied into a var first, or given as a foreach's item, must not reach
// the child's status, history and console either. Either way of keeping
// it hidden passes: refusing such a with at compile time, or masking the
// parent's secrets in the child's shown input.
func TestChildSagaMasksAParentSecretPassedThroughAVarOrItem(t *testing.T) {
	t.Parallel()
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

// A child saga whose input is not declared takes its with whole; a map
// whose KEY is a secret of its parent (copied into a var first) becomes a
// top-level key of the child's input. The child inherits the secret, and
// its shown input masks it as a field name as well as a value, so its
// status and console page never show it. docs/DEFINITIONS.md, "Secrets:
// what is hidden where": a secret that reaches the child "another way
// (copied into a var first ...)" is masked by the child's Redactor "as
// its own".
func TestChildSagaMasksAParentSecretUsedAsAnInputKey(t *testing.T) {
	t.Parallel()
	p, err := compileFiles(map[string]string{
		"main.yaml": `saga: m
input: {card: secret string}
steps:
  - id: keep
    set: {byCard: "${ {input.card: 'visa'} }"}
  - id: pay
    saga: pay.yaml
    with: "${vars.byCard}"
`,
		"pay.yaml": "saga: p\nsteps: [{id: b, action: w}]\n",
	}, forks)
	if err != nil {
		t.Skipf("refused: the secret cannot reach the child (%v)", err)
	}
	in, err := p.CheckInput(map[string]any{"card": card})
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1", Input: in}); err != nil {
		t.Fatal(err)
	}
	cp, child := launchChild(t, p, st, 0)
	if len(child.Inherited) == 0 {
		t.Fatalf("the child inherited nothing; its input is %v", child.Input)
	}
	shown := cp.Redactor(child).State(child)
	b, _ := json.Marshal(shown.Input)
	if strings.Contains(string(b), card) {
		t.Errorf("the child saga's shown input %s holds its parent's secret card", b)
	}
}

// A child saga's run knows only the secrets its own definition declares:
// giving it a secret through a field it does not declare secret is refused.
func TestChildSagaMustDeclareSecretsItIsGiven(t *testing.T) {
	t.Parallel()
	main := "saga: m\ninput: {card: secret string, id: string}\nsteps:\n  - id: a\n    saga: pay.yaml\n    with: {card: \"${input.card}\", id: \"${input.id}\"}\n"
	filesRefused(t, map[string]string{"main.yaml": main, "pay.yaml": "saga: p\ninput: {card: string, id: string}\nsteps: [{id: b, action: w}]\n"},
		"main.yaml:6:", "step a: with.card: reads secret input.card, but saga p declares input card without secret: declare it secret string there")
	filesRefused(t, map[string]string{"main.yaml": "saga: m\ninput: {card: secret string}\nsteps:\n  - {id: a, saga: pay.yaml, with: \"${{'c': input.card}}\"}\n", "pay.yaml": "saga: p\nsteps: [{id: b, action: w}]\n"},
		"main.yaml:4:", "step a: with: reads secret input.card")
	if _, err := compileFiles(map[string]string{"main.yaml": main, "pay.yaml": "saga: p\ninput: {card: secret string, id: string}\nsteps: [{id: b, action: w}]\n"}, forks); err != nil {
		t.Fatalf("a child declaring the field secret is refused: %v", err)
	}
}

// A branch copies its saga's secret input fields, even unread, so that its
// own redactor hides what its vars hold of them.
func TestBranchCarriesSecrets(t *testing.T) {
	t.Parallel()
	p, err := compileFiles(map[string]string{"main.yaml": `saga: m
input: {card: secret string, id: string, other: string}
steps:
  - id: fan
    parallel:
      - steps: [{id: ship, action: ship, with: {p: "${input.id}"}}]
`}, forks)
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	in, err := p.CheckInput(map[string]any{"card": card, "id": "o-1", "other": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1", Input: in}); err != nil {
		t.Fatal(err)
	}
	_, cs, err := p.Launch(st, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Input["card"] != card {
		t.Fatalf("branch input %v lacks the secret", cs.Input)
	}
	if _, ok := cs.Input["other"]; ok {
		t.Fatalf("branch input %v holds an unread field that is not secret", cs.Input)
	}
}

// A child saga inherits the texts of its parent's secrets that its input
// holds, and only those: they survive its item's encoding, and pass on to
// its own branches and child sagas.
func TestChildSagaInheritsTheSecretsItsInputHolds(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"main.yaml": `saga: m
input: {card: secret string, cvc: secret string, note: string}
steps:
  - id: keep
    set: {c: "card ${input.card}"}
  - id: pay
    saga: pay.yaml
    with: {ref: "${vars.c}", note: "${input.note}"}
`,
		"pay.yaml": `saga: p
input: {ref: string, note: string}
steps:
  - id: both
    parallel:
      - steps: [{id: a, action: w}]
      - steps: [{id: again, saga: leaf.yaml, with: {r: "${input.ref}"}}]
`,
		"leaf.yaml": "saga: l\ninput: {r: string}\nsteps: [{id: z, action: w}]\n",
	}
	p, err := compileFiles(files, forks)
	if err != nil {
		t.Fatal(err)
	}
	in, err := p.CheckInput(map[string]any{"card": card, "cvc": "737", "note": "gift"})
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1", Input: in}); err != nil {
		t.Fatal(err)
	}
	// launch starts child k of st's fork, its item encoded and read back.
	launch := func(p *saga.Plan, st *saga.State, k int, id string) (*saga.Plan, *saga.State) {
		t.Helper()
		cp, cs, err := p.Launch(st, k)
		if err != nil {
			t.Fatal(err)
		}
		child := &saga.State{}
		if err := cp.Advance(child, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: id, Input: cs.Input, Child: cs}); err != nil {
			t.Fatal(err)
		}
		b, err := child.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var read saga.State
		if err := read.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		return cp, &read
	}
	pp, pay := launch(p, st, 0, "s-1.pay")
	if want := []string{card}; !slices.Equal(pay.Inherited, want) {
		t.Fatalf("the child saga inherits %q, want %q (the cvc is not in its input)", pay.Inherited, want)
	}
	shown := pp.Redactor(pay).State(pay)
	if got := shown.Input["ref"]; got != "card "+saga.Mask {
		t.Errorf("the child saga's ref shows as %q", got)
	}
	if got := shown.Input["note"]; got != "gift" {
		t.Errorf("the child saga's note shows as %q, want it as it is", got)
	}
	bp, branch := launch(pp, pay, 1, "s-1.pay.b1")
	lp, leaf := launch(bp, branch, 0, "s-1.pay.b1.leaf")
	for name, r := range map[string]*saga.Redactor{"branch": bp.Redactor(branch), "grandchild": lp.Redactor(leaf)} {
		if got := r.Text("declined: card " + card); strings.Contains(got, card) {
			t.Errorf("the %s's redactor shows %q", name, got)
		}
	}
	if got := lp.Redactor(leaf).State(leaf).Input["r"]; got != "card "+saga.Mask {
		t.Errorf("the grandchild's input shows as %q", got)
	}
}

// A child saga that declares secret the field its parent's secret goes to
// hides it by its own redactor: its item does not hold the text twice.
func TestChildSagaDeclaringTheSecretInheritsNothing(t *testing.T) {
	t.Parallel()
	p, err := compileFiles(map[string]string{
		"main.yaml": "saga: m\ninput: {card: secret string}\nsteps:\n  - id: pay\n    saga: pay.yaml\n    with: {card: \"${input.card}\"}\n",
		"pay.yaml":  "saga: p\ninput: {card: secret string}\nsteps: [{id: a, action: w}]\n",
	}, forks)
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1", Input: map[string]any{"card": card}}); err != nil {
		t.Fatal(err)
	}
	cp, cs, err := p.Launch(st, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Secrets != nil {
		t.Fatalf("the child inherits %q, which it declares secret itself", cs.Secrets)
	}
	child := &saga.State{}
	if err := cp.Advance(child, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1.pay", Input: cs.Input, Child: cs}); err != nil {
		t.Fatal(err)
	}
	if got := cp.Redactor(child).Text("declined " + card); strings.Contains(got, card) {
		t.Fatalf("the child shows %q", got)
	}
}
