package saga_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A fork's states against saga.MaxStateBytes: a branch's end and an
// iteration's start leave a state the store can hold.

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
	t.Parallel()
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
	t.Parallel()
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
