package engine_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A parallel branch whose last step writes a 160 KiB out (its state
// holds it once: well within saga.MaxStateBytes) ends, and the parent
// joins with its output: the branch's end makes that value its output
// too, and the state that would hold it twice (320 KiB) must still be
// storable. Otherwise every delivery of the action's result fails with
// ErrTooLarge, the message goes to the dead-letter queue and the parent
// waits on its fork forever, with the other branch's effect never
// compensated. DESIGN 2.1: what validation accepts "never gets stuck,
// and ends in a final status or a wait"; docs/PROTOCOL.md, "Limits": the
// step that grows the state past 300 KiB fails with StateTooLarge, and
// the saga compensates.
func TestBranchWithALargeOutJoins(t *testing.T) {
	plan := mustCompile(t, `
saga: large
steps:
  - id: both
    parallel:
      - steps: [{id: big, action: svc.big, out: blob}]
      - steps: [{id: small, action: svc.small, compensate: {action: svc.small_undo}}]
    out: outs
`)
	blob := strings.Repeat("x", 160<<10)
	r, errs := runToTheEnd(t, plan, func(c saga.Call) any {
		if c.Step == "big" {
			return blob
		}
		return map[string]any{"ok": true}
	})
	st := finalParent(t, r, errs)
	outs, _ := st.Vars["outs"].([]any)
	if st.Status != durable.StatusSucceeded || len(outs) != 2 || outs[0] != blob {
		t.Fatalf("the parent %s (%v) with %d outputs, want succeeded with the big branch's output first", st.Status, st.Failure, len(outs))
	}
}

// An iteration of a foreach over a list in vars, whose body also reads
// the list, holds the list (its copy of the vars it reads) and its item
// (State.Scope): 280 KiB of list in the parent, which fits, make an
// iteration of 420 KiB, past even the 380 KiB of a failed saga. The
// foreach step fails with StateTooLarge and the saga compensates, no
// iteration run; a launch that failed on every delivery instead would
// leave the parent waiting on its fork forever. DESIGN 2.1: what
// validation accepts "never gets stuck".
func TestForeachIterationTooLargeFailsTheStep(t *testing.T) {
	plan := mustCompile(t, `
saga: items
steps:
  - id: load
    action: svc.load
    out: list
    compensate: {action: svc.unload}
  - id: each
    foreach: "${vars.list}"
    concurrency: 1
    steps:
      - {id: one, action: svc.one, with: {item: "${item}", of: "${size(vars.list)}"}}
`)
	list := []any{strings.Repeat("a", 140<<10), strings.Repeat("b", 140<<10)}
	r, errs := runToTheEnd(t, plan, func(c saga.Call) any {
		if c.Step == "load" {
			return list
		}
		return map[string]any{"ok": true}
	})
	st := finalParent(t, r, errs)
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != "StateTooLarge" {
		t.Fatalf("the parent %s (%v), want compensated with StateTooLarge", st.Status, st.Failure)
	}
	if calls := r.calls(); !strings.Contains(calls, "unload") || strings.Contains(calls, "one") {
		t.Fatalf("calls %s: want load undone and no iteration run", calls)
	}
}
