package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// outActions answers each call with out's value, and notes the
// steps it was called for.
type outActions struct {
	out   func(saga.Call) any
	mu    *sync.Mutex
	steps *[]string
}

func (a outActions) Invoke(_ context.Context, c saga.Call) (any, error) {
	a.mu.Lock()
	*a.steps = append(*a.steps, c.Action)
	a.mu.Unlock()
	return a.out(c), nil
}

// runToTheEnd starts plan as saga p on a memory store, with the
// hand-delivered queue of fork_messages_lost_test.go, and delivers every message
// (a message whose handling fails goes back to the end, as SQS
// redelivers it) until none is left or 500 deliveries were made.
func runToTheEnd(t *testing.T, plan *saga.Plan, out func(saga.Call) any) (*outRig, []error) {
	t.Helper()
	r := &outRig{handRig: &handRig{t: t, q: &handQueue{}, store: &handStore{Store: memstore.New()}, clock: durable.NewManualClock(t0)}}
	c, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: r.store, Queue: r.q, Actions: outActions{out, &r.mu, &r.actions}, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	r.coord = c
	if _, err := c.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	var errs []error
	for range 500 {
		ok, err := r.deliver(func(durable.Message) bool { return true })
		if !ok {
			break
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return r, errs
}

type outRig struct {
	*handRig
	mu      sync.Mutex
	actions []string
}

// calls lists the actions called, in order.
func (r *outRig) calls() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.actions, " ")
}

// finalParent returns saga p, failing the test unless it is final.
func finalParent(t *testing.T, r *outRig, errs []error) *saga.State {
	t.Helper()
	st := r.get("p")
	if !st.Status.Final() {
		var first error
		if len(errs) > 0 {
			first = errs[0]
		}
		t.Fatalf("the parent is %s after every message was delivered (%d handlings failed, the first: %v), want it final", st.Status, len(errs), first)
	}
	return st
}

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
