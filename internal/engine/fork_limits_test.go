package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// A fork at its limits: the widest foreach, the most branches, the
// deepest nesting, and outputs too large to keep.

const wideYAML = `saga: wide
input: {items: list}
steps:
  - id: each
    foreach: "${input.items}"
    concurrency: 100
    steps:
      - {id: one, action: ones.do, with: {arg: "${index}"}}
  - {id: last, action: last.do, with: {arg: last}}
`

// A foreach of 10,000 elements at concurrency 100 (100 lanes) runs every
// element once and joins; one of 10,001 fails its step before forking.
func TestForeachOfMaxItemsRunsAndOneMoreFailsTheStep(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 children")
	}
	for _, n := range []int{lang.MaxForeachItems, lang.MaxForeachItems + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := newFrig(t, wideYAML, nil)
			items := make([]any, n)
			for i := range items {
				items[i] = int64(i)
			}
			began := time.Now()
			r.start("p", map[string]any{"items": items})
			r.drain()
			st := r.get("p")
			t.Logf("%d elements: %s, %s", n, st.Status, time.Since(began).Round(time.Millisecond))
			if n > lang.MaxForeachItems {
				if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Step != "each" {
					t.Fatalf("%d elements: %s %+v; want the step to fail", n, st.Status, st.Failure)
				}
				return
			}
			if st.Status != durable.StatusSucceeded {
				t.Fatalf("%s %+v: %s", st.Status, st.Failure, firstLines(r.handleErrors(), 3))
			}
			log := r.effects()
			if len(log) != n+1 {
				t.Fatalf("%d effects, want %d", len(log), n+1)
			}
		})
	}
}

// A parallel of 20 branches (lang.MaxBranches) all run and join in order.
func TestParallelOfMaxBranchesJoinsInOrder(t *testing.T) {
	var b strings.Builder
	b.WriteString("saga: twenty\nsteps:\n  - id: fan\n    parallel:\n")
	for i := range lang.MaxBranches {
		fmt.Fprintf(&b, "      - steps: [{id: b%d, action: bs.do, with: {arg: %d}, out: o%d}]\n", i, i, i)
	}
	b.WriteString("    out: all\n")
	r := newFrig(t, b.String(), nil)
	r.start("p", nil)
	r.drain()
	st := r.get("p")
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("%s %+v", st.Status, st.Failure)
	}
	for i, o := range st.Vars["all"].([]any) {
		if o.(map[string]any)["arg"] != int64(i) {
			t.Fatalf("output %d is %v", i, o)
		}
	}
}

// A branch's action returns more than a saga's state holds: the branch
// fails with StateTooLarge, the fork fails, and the other branch and the
// step before are undone.
func TestBranchOutputTooLargeFailsTheForkAndUndoesTheRest(t *testing.T) {
	src := `saga: huge
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - id: fan
    parallel:
      - steps: [{id: a, action: a.do, with: {arg: a}, out: big, compensate: {action: a.undo, with: {arg: a}}}]
      - steps: [{id: b, action: b.do, with: {arg: b}, compensate: {action: b.undo, with: {arg: b}}}]
    out: all
`
	r := newFrig(t, src, nil)
	r.outs["a.do(a)"] = func() any { return strings.Repeat("x", 350<<10) }
	r.start("p", nil)
	r.drain()
	st := r.get("p")
	log := r.effects()
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != lang.ErrorTypeStateTooLarge {
		t.Fatalf("%s %+v, effects %v: %s", st.Status, st.Failure, log, firstLines(r.handleErrors(), 3))
	}
	for _, u := range []string{"a.undo(a)", "b.undo(b)", "first.undo(first)"} {
		if countOf(log, u) != 1 {
			t.Errorf("%s ran %d times: %v", u, countOf(log, u), log)
		}
	}
}

// A foreach list computed from saga.now is kept at the fork: an element
// launched a minute later sees the value the list had at the fork.
func TestForeachListFromSagaNowIsKeptAtTheFork(t *testing.T) {
	src := `saga: now
steps:
  - {id: w0, action: w.do, with: {arg: w0}}
  - id: each
    foreach: "${[string(saga.now), string(saga.now)]}"
    concurrency: 1
    steps:
      - {id: pause, wait: {for: 1m}}
      - {id: use, action: use.do, with: {arg: "${item}"}}
`
	r := newFrig(t, src, nil)
	r.start("p", nil)
	r.drain()
	log := r.effects()
	if st := r.get("p"); st.Status != durable.StatusSucceeded || len(log) != 3 || log[1] != log[2] {
		t.Fatalf("%s %+v, effects %v: want both elements the same time", st.Status, st.Failure, log)
	}
}

// Forks nested lang.MaxForkDepth deep run and join.
func TestForksNestedAtMaxForkDepthJoin(t *testing.T) {
	inner := "{id: leaf, action: leaves.do, with: {arg: leaf}, out: l}"
	for d := lang.MaxForkDepth; d >= 1; d-- {
		inner = fmt.Sprintf("{id: f%d, parallel: [{steps: [%s]}, {steps: [{id: s%d, action: ss.do, with: {arg: s%d}}]}], out: o%d}", d, inner, d, d, d)
	}
	src := "saga: deep\nsteps:\n  - " + inner + "\n"
	r := newFrig(t, src, nil)
	r.start("p", nil)
	r.drain()
	st := r.get("p")
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("%s %+v: %s", st.Status, st.Failure, firstLines(r.handleErrors(), 3))
	}
	if n := len(r.effects()); n != lang.MaxForkDepth+1 {
		t.Fatalf("%d effects, want %d: %v", n, lang.MaxForkDepth+1, r.effects())
	}
}
