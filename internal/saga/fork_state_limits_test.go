package saga_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// startFiles compiles files (main.yaml the saga) and starts saga s-1
// with no input.
func startFiles(t *testing.T, files map[string]string) (*saga.Plan, *saga.State) {
	t.Helper()
	p, err := compileFiles(files, forks)
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1", Input: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	return p, st
}

// launchChild starts child k of the fork st waits on, as the coordinator's
// launch does.
func launchChild(t *testing.T, p *saga.Plan, st *saga.State, k int) (*saga.Plan, *saga.State) {
	t.Helper()
	cp, cs, err := p.Launch(st, k)
	if err != nil {
		t.Fatal(err)
	}
	child := &saga.State{}
	id := durable.ChildID(st.SagaID, cs.Link.Step, cs.Link.Seq, k)
	if err := cp.Advance(child, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: id, Input: cs.Input, Child: cs, StoreLimit: saga.MaxStateBytes}); err != nil {
		t.Fatal(err)
	}
	return cp, child
}

// A branch whose last step writes a large out (160 KiB: the state holds
// it once, well within saga.MaxStateBytes) ends with that value as its
// output too, so its state would hold it twice (Vars and Output; only the
// whole vars map is shared by the codec). The branch's end, measured
// against saga.MaxStateBytes, must leave a state the store can hold:
// otherwise every delivery of the action's result fails with ErrTooLarge,
// the child never ends and its parent waits on the fork forever.
// docs/PROTOCOL.md, "Limits": past 300 KiB "the step that grew it fails
// with StateTooLarge, and the saga compensates"; DESIGN 2.1: what
// validation accepts "never gets stuck".
func TestBranchWhoseOutputDoublesItsStateEndsStorable(t *testing.T) {
	p, err := compileFiles(map[string]string{"main.yaml": `saga: m
steps:
  - id: both
    parallel:
      - steps: [{id: big, action: w, out: blob}]
      - steps: [{id: small, action: w}]
    out: outs
`}, forks)
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1", Input: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	cp, child := launchChild(t, p, st, 0)
	if _, err := cp.Call(child, t0); err != nil {
		t.Fatal(err)
	}
	blob := strings.Repeat("x", 160<<10)
	if err := cp.Advance(child, saga.Event{Kind: saga.EventResult, Now: t0, Output: blob, StoreLimit: saga.MaxStateBytes}); err != nil {
		t.Fatal(err)
	}
	if _, err := child.Record(nil); err != nil {
		t.Fatalf("the branch ended %s, measured against saga.MaxStateBytes, yet its state cannot be stored: %v", child.Status, err)
	}
}

// The map keys inside a secret any are secrets too. A secret field
// holding {"tok_live_9f8e7d6c": ...} (an API key used as a key, a card
// number mapping to its holder) must not show wherever the saga copies
// it: its vars in status and the console, an error message.
// docs/DEFINITIONS.md, "Secrets: what is hidden where": the Redactor
// masks "every string and number inside a secret any".
func TestSecretAnyMasksItsMapKeys(t *testing.T) {
	p, err := compileFiles(map[string]string{"main.yaml": `saga: m
input: {extra: secret any}
steps:
  - id: keep
    set: {copy: "${input.extra}"}
  - id: a
    action: w
`}, forks)
	if err != nil {
		t.Fatal(err)
	}
	const key = "tok_live_9f8e7d6c"
	in, err := p.CheckInput(map[string]any{"extra": map[string]any{key: "holder"}})
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1", Input: in}); err != nil {
		t.Fatal(err)
	}
	red := p.Redactor(st)
	shown := red.State(st)
	b, _ := json.Marshal(shown.Vars)
	if strings.Contains(string(b), key) {
		t.Errorf("the shown vars %s hold the secret input's key %s", b, key)
	}
	if msg := red.Text("declined: unknown token " + key); strings.Contains(msg, key) {
		t.Errorf("a message masked as %q still holds the secret input's key", msg)
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

// A foreach over a list in vars, whose body also reads that list (a
// neighbour, its size), gives each iteration a copy of the list and its
// item besides (State.Scope): the iteration's state would hold the item
// twice. The parent's state, with the list once (280 KiB), is within
// saga.MaxStateBytes; an iteration's would be about 420 KiB, past even
// the 380 KiB of a failed saga. The iteration's start, measured against
// saga.MaxStateBytes, must leave a state the store can hold: otherwise
// the launch fails on every delivery and the parent waits on its fork
// forever. docs/PROTOCOL.md, "Limits", and DESIGN 2.1: what validation
// accepts "never gets stuck"; the step that grows the state past its
// limit fails with StateTooLarge and the saga compensates.
func TestForeachIterationHoldingItsItemTwiceStartsStorable(t *testing.T) {
	p, err := compileFiles(map[string]string{"main.yaml": `saga: m
steps:
  - id: load
    action: w
    out: list
  - id: each
    foreach: "${vars.list}"
    concurrency: 1
    steps:
      - {id: one, action: w, with: {item: "${item}", of: "${size(vars.list)}"}}
`}, forks)
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1", Input: map[string]any{}, StoreLimit: saga.MaxStateBytes}); err != nil {
		t.Fatal(err)
	}
	list := []any{strings.Repeat("a", 140<<10), strings.Repeat("b", 140<<10)}
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: list, StoreLimit: saga.MaxStateBytes}); err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusWaiting {
		t.Fatalf("the parent is %s (%v), want waiting on its foreach", st.Status, st.Failure)
	}
	if _, err := st.Record(nil); err != nil {
		t.Fatalf("the parent cannot be stored: %v", err)
	}
	_, child := launchChild(t, p, st, 0)
	if _, err := child.Record(nil); err != nil {
		t.Fatalf("iteration 0 started %s (%v), measured against saga.MaxStateBytes, yet its state cannot be stored: %v", child.Status, child.Failure, err)
	}
}

// A fork's catch takes a child's failure of type SagaDeadlineExceeded or
// Cancelled when it came from inside the fork: a child saga that runs
// past its OWN timeout (timeout: 10m in its file; the parent has none),
// or a branch whose action fails with the type Cancelled (an order
// cancelled upstream; the same catch on the same action outside a fork
// takes it), goes to the catch's step rather than making the parent
// compensate everything. The type alone does not say "a cancel or the
// deadline of this saga". docs/DEFINITIONS.md, "Forks": a saga step's
// failure "fails the step with the child's error type"; "catch on a fork
// routes the fork's failure, once the children it ran are undone"; only
// "past the saga's deadline" (the parent's) does no catch take it.
func TestForkCatchTakesAChildsOwnDeadlineOrCancelledType(t *testing.T) {
	for name, tc := range map[string]struct {
		files map[string]string
		fail  func(cp *saga.Plan, child *saga.State) error // ends the child, failed
	}{
		"a child saga past its own timeout": {map[string]string{
			"main.yaml": `saga: m
steps:
  - id: pay
    saga: pay.yaml
    catch: [{errors: ["*"], next: fallback}]
  - id: fallback
    action: w
`,
			"pay.yaml": `saga: p
timeout: 10m
steps:
  - id: charge
    action: w
  - id: confirm
    action: w
`}, func(cp *saga.Plan, child *saga.State) error {
			// charge returns after the child's deadline: confirm does not start.
			return cp.Advance(child, saga.Event{Kind: saga.EventResult, Now: t0.Add(11 * time.Minute), Output: map[string]any{}})
		}},
		"a branch whose action fails with type Cancelled": {map[string]string{
			"main.yaml": `saga: m
steps:
  - id: both
    parallel:
      - steps: [{id: order, action: w}]
      - steps: [{id: other, action: w}]
    catch: [{errors: [Cancelled], next: fallback}]
  - id: fallback
    action: w
`}, func(cp *saga.Plan, child *saga.State) error {
			return cp.Advance(child, saga.Event{Kind: saga.EventResult, Now: t0.Add(time.Minute), Err: saga.Permanent(saga.NewError("Cancelled", "the order was cancelled upstream"))})
		}},
	} {
		t.Run(name, func(t *testing.T) {
			p, st := startFiles(t, tc.files)
			cur, _ := st.Pending()
			cp, child := launchChild(t, p, st, 0)
			if err := tc.fail(cp, child); err != nil {
				t.Fatal(err)
			}
			if child.Status != durable.StatusCompensated || child.Failure == nil {
				t.Fatalf("the child is %s (%v), want compensated", child.Status, child.Failure)
			}
			t.Logf("the child failed: %s", child.Failure.Error())
			if err := p.Advance(st, saga.Event{Kind: saga.EventJoin, Now: t0.Add(12 * time.Minute), Join: &saga.Join{Version: cur.Version, Failure: child.Failure}}); err != nil {
				t.Fatal(err)
			}
			next, ok := st.Pending()
			if st.Status != durable.StatusRunning || !ok || p.StepID(next.Step) != "fallback" {
				t.Errorf("after the child's %s failure the parent is %s (failure %v), want running the catch's step fallback", child.Failure.Type, st.Status, st.Failure)
			}
		})
	}
}

// The other side of the catch's rule: the saga's own cancel, and its own
// deadline passing while the children run, go past a fork's catch ["*"]
// (docs/DEFINITIONS.md, "Forks").
func TestForkCatchNeverTakesTheSagasOwnCancelOrDeadline(t *testing.T) {
	const main = `saga: m
timeout: 1h
steps:
  - id: both
    parallel:
      - steps: [{id: a, action: w}]
      - steps: [{id: b, action: w}]
    catch: [{errors: ["*"], next: fallback}]
  - id: fallback
    action: w
`
	for name, tc := range map[string]struct {
		stop saga.Event
		want string
	}{
		"cancel":   {saga.Event{Kind: saga.EventCancel, Now: t0.Add(time.Minute)}, "Cancelled"},
		"deadline": {saga.Event{Kind: saga.EventTimer, Now: t0.Add(time.Hour)}, "SagaDeadlineExceeded"},
	} {
		t.Run(name, func(t *testing.T) {
			p, st := startFiles(t, map[string]string{"main.yaml": main})
			cur, _ := st.Pending()
			if err := p.Advance(st, tc.stop); err != nil {
				t.Fatal(err)
			}
			// The stop cancelled both children before they did anything:
			// the fork's record names no child, as the coordinator's stop
			// writes it.
			stopped := &saga.StepError{Step: "both", Type: "Cancelled", Message: "the fork was stopped"}
			if err := p.Advance(st, saga.Event{Kind: saga.EventJoin, Now: t0.Add(time.Hour + time.Minute), Join: &saga.Join{Version: cur.Version, Failure: stopped}}); err != nil {
				t.Fatal(err)
			}
			if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != tc.want {
				next, _ := st.Pending()
				t.Fatalf("after its own %s the saga is %s (failure %v, next %s), want compensated with %s", name, st.Status, st.Failure, p.StepID(next.Step), tc.want)
			}
		})
	}
}
