package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// What a fork means: the order of its undo, the scope of a branch's vars,
// items and indexes, child sagas, and signals; behaviour the docs promise.

// A fork that succeeded is undone branch by branch, highest index first,
// each branch newest step first, and then the step before the fork.
func TestForkIsUndoneHighestBranchFirstThenTheStepBefore(t *testing.T) {
	t.Parallel()
	src := `saga: order
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - id: fan
    parallel:
      - steps:
          - {id: a1, action: a.do, with: {arg: a1}, compensate: {action: a.undo, with: {arg: a1}}}
          - {id: a2, action: a.do, with: {arg: a2}, compensate: {action: a.undo, with: {arg: a2}}}
      - steps:
          - {id: b1, action: b.do, with: {arg: b1}, compensate: {action: b.undo, with: {arg: b1}}}
  - {id: mid, action: mid.do, with: {arg: mid}, compensate: {action: mid.undo, with: {arg: mid}}}
  - {id: last, action: last.do, with: {arg: last}}
`
	r := newForkRig(t, src, nil)
	r.fail["last.do(last)"] = true
	r.start("p", nil)
	r.drain()
	log := r.effects()
	i := slices.Index(log, "mid.undo(mid)")
	if i < 0 || !slices.Equal(log[i:], []string{"mid.undo(mid)", "b.undo(b1)", "a.undo(a2)", "a.undo(a1)", "first.undo(first)"}) {
		t.Fatalf("effects %v", log)
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("parent %s", st.Status)
	}
}

// A branch that ends with succeed gives its output; vars a branch writes
// do not reach the parent; a next loop inside a body runs.
func TestBranchSucceedOutputVarScopeAndLoops(t *testing.T) {
	t.Parallel()
	src := `saga: sem
steps:
  - id: s0
    set: {shared: "${'before'}"}
  - id: fan
    parallel:
      - steps:
          - {id: w, action: w.do, with: {arg: w}, out: leaked}
          - {id: s1, set: {shared: "${'branch'}"}}
          - {id: fin, succeed: {output: "${{'from': 'succeed', 'shared': vars.shared}}"}}
      - steps:
          - {id: init, set: {n: "${0}"}}
          - {id: tick, action: t.do, with: {arg: "${vars.n}"}, out: last}
          - {id: inc, set: {n: "${vars.n + 1}"}}
          - id: loop
            switch:
              - {if: "${vars.n < 3}", next: tick}
              - {default: out}
          - {id: out, set: {res: "${vars.n}"}}
    out: outs
  - {id: after, action: after.do, with: {arg: "${has(vars.leaked) ? 'leaked' : vars.shared}"}}
`
	r := newForkRig(t, src, nil)
	r.start("p", nil)
	r.drain()
	st := r.get("p")
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("parent %s %+v", st.Status, st.Failure)
	}
	outs := st.Vars["outs"].([]any)
	b0, _ := outs[0].(map[string]any)
	if b0["from"] != "succeed" || b0["shared"] != "branch" {
		t.Errorf("branch 0's output %v, want its succeed output", outs[0])
	}
	log := r.effects()
	if !slices.Contains(log, "after.do(before)") {
		t.Errorf("a branch's vars leaked into the parent: %v", log)
	}
	if n := countOf(log, "t.do(0)") + countOf(log, "t.do(1)") + countOf(log, "t.do(2)"); n != 3 {
		t.Errorf("the loop in branch 1 ran %d times: %v (output %v)", n, log, outs[1])
	}
	if b1, _ := outs[1].(map[string]any); b1["arg"] != int64(2) {
		t.Errorf("branch 1's output %v, want its last out (tick's third)", outs[1])
	}
}

// item and index in nested foreach steps: the inner as hides nothing of
// the outer's (other names), the inner index hides the outer's; the inner
// list reads the outer item (a stable list, evaluated again at each
// launch from the outer iteration's state) and the parent's input.
func TestNestedForeachItemsAndIndexes(t *testing.T) {
	t.Parallel()
	src := `saga: nest
input: {groups: list, tag: string}
steps:
  - id: outer
    foreach: "${input.groups}"
    as: grp
    concurrency: 2
    steps:
      - {id: gi, set: {gidx: "${index}"}}
      - id: inner
        foreach: "${grp.parts}"
        as: part
        concurrency: 2
        steps:
          - id: work
            action: parts.do
            with: {arg: "${input.tag + ':' + grp.name + ':' + part + ':' + string(index) + ':' + string(vars.gidx)}"}
            out: r
        out: rs
    out: all
`
	r := newForkRig(t, src, nil)
	groups := []any{
		map[string]any{"name": "g0", "parts": []any{"a", "b", "c"}},
		map[string]any{"name": "g1", "parts": []any{"d"}},
		map[string]any{"name": "g2", "parts": []any{"e", "f"}},
	}
	r.start("p", map[string]any{"groups": groups, "tag": "T"})
	r.drain()
	st := r.get("p")
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("parent %s %+v (%s)", st.Status, st.Failure, firstLines(r.handleErrors(), 3))
	}
	var got []string
	for _, g := range st.Vars["all"].([]any) {
		for _, o := range g.([]any) {
			got = append(got, fmt.Sprint(o.(map[string]any)["arg"]))
		}
	}
	want := []string{"T:g0:a:0:0", "T:g0:b:1:0", "T:g0:c:2:0", "T:g1:d:0:1", "T:g2:e:0:2", "T:g2:f:1:2"}
	if !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
}

// A child saga with a callback step: the child gets its own secret, and
// its token completes it; the parent goes on with the child's output.
func TestChildSagaCompletedByItsCallback(t *testing.T) {
	t.Parallel()
	parent := `saga: main
steps:
  - id: pay
    saga: pay.yaml
    with: {amount: 5}
    out: paid
  - {id: after, action: after.do, with: {arg: "${string(vars.paid.charge.ok)}"}}
`
	child := `saga: pay
input: {amount: int}
steps:
  - id: charge
    action: cards.charge_async
    with: {amount: "${input.amount}"}
    callback: {timeout: 1h}
    out: charge
`
	r := newForkRig(t, parent, map[string]string{"pay.yaml": child})
	ctx := context.Background()
	r.start("p", nil)
	r.drain()
	r.mu.Lock()
	tok := r.tokens["charge"]
	r.mu.Unlock()
	if tok == "" {
		t.Fatal("the child's action got no callback token")
	}
	if _, err := r.coord.CompleteCallback(ctx, tok, map[string]any{"ok": true}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusSucceeded || !slices.Contains(r.effects(), "after.do(true)") {
		t.Fatalf("parent %s, effects %v", st.Status, r.effects())
	}
}

// A child saga that itself forks is undone as a whole when the parent
// compensates: its branches' steps are undone, then its own.
func TestChildSagaThatForksIsUndoneAsAWhole(t *testing.T) {
	t.Parallel()
	parent := `saga: main
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - id: sub
    saga: sub.yaml
    with: {}
  - {id: last, action: last.do, with: {arg: last}}
`
	child := `saga: sub
steps:
  - {id: c0, action: c.do, with: {arg: c0}, compensate: {action: c.undo, with: {arg: c0}}}
  - id: cfan
    parallel:
      - steps: [{id: x, action: x.do, with: {arg: x}, compensate: {action: x.undo, with: {arg: x}}}]
      - steps: [{id: y, action: y.do, with: {arg: y}, compensate: {action: y.undo, with: {arg: y}}}]
`
	r := newForkRig(t, parent, map[string]string{"sub.yaml": child})
	r.fail["last.do(last)"] = true
	r.start("p", nil)
	r.drain()
	log := r.effects()
	want := []string{"y.undo(y)", "x.undo(x)", "c.undo(c0)", "first.undo(first)"}
	if st := r.get("p"); st.Status != durable.StatusCompensated || len(log) < 4 || !slices.Equal(log[len(log)-4:], want) {
		t.Fatalf("parent %s, effects %v; want them to end %v (%s)", st.Status, log, want, firstLines(r.handleErrors(), 3))
	}
}

// A signal sent to a parent while it waits on a fork is kept, and the
// await after the fork takes it at once.
func TestSignalToAParentWaitingOnAForkIsKeptForItsAwait(t *testing.T) {
	t.Parallel()
	src := `saga: sig
steps:
  - id: fan
    parallel:
      - steps: [{id: x, action: x.do, with: {arg: x}}]
  - {id: gate, await: {signal: go, timeout: 1h}, out: g}
  - {id: after, action: after.do, with: {arg: "${vars.g.v}"}}
`
	r := newForkRig(t, src, nil)
	ctx := context.Background()
	r.start("p", nil)
	d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "p", Name: "go", Payload: map[string]any{"v": "yes"}, ID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusSucceeded || !slices.Contains(r.effects(), "after.do(yes)") {
		t.Fatalf("signal %s; parent %s, effects %v", d.Receipt, st.Status, r.effects())
	}
}

// A fork visited twice (a loop back to it) is two entries on the stack:
// when the saga compensates, the children of both visits are undone, the
// later visit's first.
func TestAForkVisitedTwiceIsUndoneTwice(t *testing.T) {
	t.Parallel()
	src := `saga: twice
steps:
  - {id: init, set: {n: "${0}"}}
  - id: fan
    parallel:
      - steps: [{id: a, action: a.do, with: {arg: "${vars.n}"}, compensate: {action: a.undo, with: {arg: "${vars.n}"}}}]
  - {id: inc, set: {n: "${vars.n + 1}"}}
  - id: again
    switch:
      - {if: "${vars.n < 2}", next: fan}
      - {default: last}
  - {id: last, action: last.do, with: {arg: last}}
`
	r := newForkRig(t, src, nil)
	r.fail["last.do(last)"] = true
	r.start("p", nil)
	r.drain()
	log := r.effects()
	want := []string{"a.do(0)", "a.do(1)", "a.undo(1)", "a.undo(0)"}
	if st := r.get("p"); st.Status != durable.StatusCompensated || !slices.Equal(log, want) {
		t.Fatalf("parent %s, effects %v, want %v", st.Status, log, want)
	}
}

// A child's id is <parent>.<step>.<visit>.<index>, and a saga id may hold
// dots: a saga someone starts as "p.fan.1.0" would be taken for the first
// branch of saga p's fork, the branch would never run, and the fork would
// never close, or join the stranger's output as its branch's. A start
// with an id of a child's form is refused, and the launch checks that a
// saga it meets is its child.
func TestAChildIDCannotBeTakenByAnotherSaga(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, twoBranchYAML, nil)
	ctx := context.Background()
	other := mustCompile(t, "saga: other\nsteps:\n  - {id: o, action: others.do, with: {arg: other}}\n")
	// No saga can take a child's id.
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: other, SagaID: "p.book.1.0"}); err == nil || !strings.Contains(err.Error(), "has the form of a child run's id") {
		t.Fatalf("a start with a child's id: %v", err)
	}
	r.start("p", nil)
	r.drain()
	log := r.effects()
	st := r.get("p")
	if !slices.Contains(log, "hotels.book(hotel)") || st.Status != durable.StatusSucceeded {
		t.Fatalf("parent %s, effects %v: the hotel branch never ran (its id belongs to another saga)", st.Status, log)
	}
}
