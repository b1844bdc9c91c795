package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A fork whose child parks (compensation_failed): the parent parks with
// it, the operator finds the child, resumes or skips it, and every
// effect is undone once.

const parkingBranchYAML = `saga: park
steps:
  - id: fan
    parallel:
      - steps:
          - {id: a1, action: a.one, with: {arg: a1}, compensate: {action: a.undo, with: {arg: a1}}}
          - {id: a2, action: a.two, with: {arg: a2}}
      - steps:
          - {id: b1, action: b.one, with: {arg: b1}, compensate: {action: b.undo, with: {arg: b1}}}
  - {id: after, action: after.run, with: {arg: after}}
`

// A branch fails and its own compensation fails for good: the branch parks
// (compensation_failed), a1's effect still in place. The parent then must
// not report that everything was undone, nor let a catch on the fork go
// on: it parks too, so the branch an operator has to repair is not hidden.
// DEFINITIONS: "A child that parks (compensation_failed) parks its
// parent".
func TestABranchThatParksParksItsParent(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, parkingBranchYAML, nil)
	r.fail["a.two(a2)"] = true
	r.fail["a.undo(a1)"] = true
	r.start("p", nil)
	r.drain()
	child := r.get(durable.ChildID("p", "fan", 1, 0))
	if child.Status != durable.StatusCompensationFailed {
		t.Fatalf("setup: branch 0 is %s", child.Status)
	}
	if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("parent %s (failure %+v) while branch 0 is parked with a1 not undone; want compensation_failed", st.Status, st.Failure)
	}
}

const catchForkYAML = `saga: caught
steps:
  - id: fan
    parallel:
      - steps: [{id: a1, action: a.one, with: {arg: a1}, compensate: {action: a.undo, with: {arg: a1}}}]
      - steps: [{id: b1, action: b.one, with: {arg: b1}}]
    catch: [{errors: [Error], next: sorry}]
  - {id: done, succeed: {output: "ok"}}
  - {id: sorry, succeed: {output: "sorry"}}
`

const threeBranchYAML = `saga: three
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - id: fan
    parallel:
      - steps: [{id: a, action: a.do, with: {arg: a}, compensate: {action: a.undo, with: {arg: a}}}]
      - steps: [{id: b, action: b.do, with: {arg: b}, compensate: {action: b.undo, with: {arg: b}}}]
      - steps: [{id: c, action: c.do, with: {arg: c}, compensate: {action: c.undo, with: {arg: c}}}]
  - {id: last, action: last.do, with: {arg: last}}
`

// A failed fork undoes the branches that succeeded, highest first (b,
// then a); b's compensation fails for good, b parks and the parent parks.
// The operator fixes b's service and resumes b, then the parent. The rest
// of the failed fork's undo list (UndoNext) survives the park: a is
// undone before the compensation stack (first), or a's booking would
// never be cancelled although the saga ends "compensated".
func TestResumeAfterAParkedUndoOfAFailedForkUndoesTheRest(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, threeBranchYAML, nil)
	ctx := context.Background()
	r.fail["c.do(c)"] = true
	r.fail["b.undo(b)"] = true
	r.start("p", nil)
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("setup: parent %s %+v", st.Status, st.Failure)
	}
	r.mu.Lock()
	delete(r.fail, "b.undo(b)")
	r.mu.Unlock()
	b := durable.ChildID("p", "fan", 2, 1)
	if _, err := r.coord.Resume(ctx, b); err != nil {
		t.Fatalf("resume b: %v", err)
	}
	r.drain()
	// b's end goes to the parent, parked on it: the parent goes on by
	// itself (an operator's resume of it then finds nothing parked).
	if _, err := r.coord.Resume(ctx, "p"); err != nil && !errors.Is(err, saga.ErrInvalidEvent) {
		t.Fatalf("resume parent: %v", err)
	}
	r.drain()
	log := r.effects()
	st := r.get("p")
	if st.Status != durable.StatusCompensated || countOf(log, "a.undo(a)") != 1 || countOf(log, "b.undo(b)") != 1 || countOf(log, "first.undo(first)") != 1 {
		t.Fatalf("parent %s, effects %v: want a, b and first each undone once", st.Status, log)
	}
}

const threeBranchLaterFailYAML = `saga: three
steps:
  - {id: first, action: first.do, with: {arg: first}, compensate: {action: first.undo, with: {arg: first}}}
  - id: fan
    parallel:
      - steps: [{id: a, action: a.do, with: {arg: a}, compensate: {action: a.undo, with: {arg: a}}}]
      - steps: [{id: b, action: b.do, with: {arg: b}, compensate: {action: b.undo, with: {arg: b}}}]
      - steps: [{id: c, action: c.do, with: {arg: c}, compensate: {action: c.undo, with: {arg: c}}}]
  - {id: last, action: last.do, with: {arg: last}}
`

// A fork that succeeded is undone child by child when a later step fails
// (c, b, a); b's compensation fails for good and the parent parks. The
// operator undoes b by hand and skips it (SkipCompensation, "without
// running the compensation that failed"). The skip leaves the fork's
// entry on the stack, so a, which nobody undid yet, is still undone.
func TestSkipOfAParkedChildSkipsOnlyThatChild(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, threeBranchLaterFailYAML, nil)
	ctx := context.Background()
	r.fail["last.do(last)"] = true
	r.fail["b.undo(b)"] = true
	r.start("p", nil)
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("setup: parent %s %+v", st.Status, st.Failure)
	}
	if _, err := r.coord.SkipCompensation(ctx, "p"); err != nil {
		t.Fatalf("skip: %v", err)
	}
	r.drain()
	log := r.effects()
	if st := r.get("p"); st.Status != durable.StatusCompensated || countOf(log, "a.undo(a)") != 1 || countOf(log, "first.undo(first)") != 1 {
		t.Fatalf("after skipping b: parent %s, effects %v; want a and first undone", st.Status, log)
	}
}

// The parked branch of TestABranchThatParksParksItsParent, seen by an
// operator: listing the sagas in compensation_failed (sagactl list, the
// alarm's runbook) must show the branch or its parent. Branches are
// unlisted, so the parent must park: otherwise the unrepaired a1 is
// invisible (and the parent expires with the table's TTL).
func TestAParkedBranchCanBeFound(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, parkingBranchYAML, nil)
	r.fail["a.two(a2)"] = true
	r.fail["a.undo(a1)"] = true
	r.start("p", nil)
	r.drain()
	res, err := r.coord.List(context.Background(), &durable.SagaListParams{Status: durable.StatusCompensationFailed})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sagas) == 0 {
		t.Fatalf("no saga listed in compensation_failed, though branch %s is parked (parent %s)",
			durable.ChildID("p", "fan", 1, 0), r.get("p").Status)
	}
}

// A branch parks while the other branch still waits on a signal; the
// operator repairs the service and resumes the branch while its parent
// still waits on the fork. The branch ends compensated, its repeated end
// is handled, and once the fork closes the parent compensates with both
// branches' effects undone once.
func TestResumeOfAParkedChildWhileItsParentWaits(t *testing.T) {
	t.Parallel()
	src := `saga: park2
steps:
  - id: fan
    parallel:
      - steps:
          - {id: a1, action: a.one, with: {arg: a1}, compensate: {action: a.undo, with: {arg: a1}}}
          - {id: a2, action: a.two, with: {arg: a2}}
      - steps:
          - {id: b1, action: b.one, with: {arg: b1}, compensate: {action: b.undo, with: {arg: b1}}}
          - {id: hold, await: {signal: go, timeout: 72h}}
  - {id: after, action: after.run, with: {arg: after}}
`
	r := newForkRig(t, src, nil)
	ctx := context.Background()
	r.fail["a.two(a2)"] = true
	r.fail["a.undo(a1)"] = true
	r.start("p", nil)
	a := durable.ChildID("p", "fan", 1, 0)
	if !r.drainUntil(func() bool { return r.get(a).Status == durable.StatusCompensationFailed }) {
		t.Fatalf("setup: branch 0 is %s", r.get(a).Status)
	}
	r.mu.Lock()
	delete(r.fail, "a.undo(a1)")
	r.mu.Unlock()
	if _, err := r.coord.Resume(ctx, a); err != nil {
		t.Fatal(err)
	}
	r.drain()
	st := r.get("p")
	log := r.effects()
	if st.Status != durable.StatusCompensated || countOf(log, "a.undo(a1)") != 1 || countOf(log, "b.undo(b1)") != 1 {
		t.Fatalf("parent %s, effects %v; handle errors: %s", st.Status, log, firstLines(r.handleErrors(), 3))
	}
}

// A fork that succeeded is undone when a later step fails; b's
// compensation fails for good, b parks and so does the parent. The
// operator repairs b's service and resumes the parent ("Resume continues
// the compensation of a saga parked in compensation_failed"). The
// parent's resume resumes b, which is still parked: an undo sent to a
// parked b would answer at once that it parked, and the parent would park
// again, never making progress.
func TestResumeOfAParentParkedOnAChildResumesTheChild(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, threeBranchLaterFailYAML, nil)
	ctx := context.Background()
	r.fail["last.do(last)"] = true
	r.fail["b.undo(b)"] = true
	r.start("p", nil)
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("setup: parent %s %+v", st.Status, st.Failure)
	}
	r.mu.Lock()
	delete(r.fail, "b.undo(b)")
	r.mu.Unlock()
	if _, err := r.coord.Resume(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	log := r.effects()
	if st := r.get("p"); st.Status != durable.StatusCompensated || countOf(log, "b.undo(b)") != 1 || countOf(log, "a.undo(a)") != 1 {
		t.Fatalf("after the parent's resume: parent %s (%v), branch b %s, effects %v",
			st.Status, st.CompensationError, r.get(durable.ChildID("p", "fan", 2, 1)).Status, log)
	}
}

// A resume of a parent parked on a child resumes the child first. The
// operator's resume fails after the child's resume was written and
// before its message was sent; the operator resumes again, and that
// resume's own send fails too; then once more. Each repeat goes on as a
// resume repeated after a lost send does, its stored messages sent
// again: a child found compensating, not parked, is sent its message
// again (not taken for resumed and sent nothing), and a parent whose
// resume set it running (a caught fork's undo) accepts the repeat (not
// refused as invalid, its own lost send never redone).
func TestARepeatedResumeSendsWhatALostSendDidNot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src string
		fail      []string
		want      durable.Status
	}{
		{"compensating", threeBranchLaterFailYAML, []string{"last.do(last)", "b.undo(b)"}, durable.StatusCompensated},
		{"caught", catchForkYAML, []string{"b.one(b1)", "a.undo(a1)"}, durable.StatusSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newForkRig(t, tc.src, nil)
			ctx := context.Background()
			for _, f := range tc.fail {
				r.fail[f] = true
			}
			r.start("p", nil)
			r.drain()
			if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
				t.Fatalf("setup: parent %s %+v", st.Status, st.Failure)
			}
			r.mu.Lock()
			delete(r.fail, tc.fail[1])
			r.mu.Unlock()
			r.queue.setHook(func(durable.Message) (bool, error) { return false, errInjected })
			for range 2 {
				if _, err := r.coord.Resume(ctx, "p"); err == nil {
					t.Fatal("setup: the resume's send did not fail")
				}
			}
			r.queue.setHook(nil)
			if _, err := r.coord.Resume(ctx, "p"); err != nil {
				t.Fatalf("a resume repeated after lost sends: %v", err)
			}
			r.drain()
			if st := r.get("p"); st.Status != tc.want {
				t.Fatalf("parent %s after the resumes, want %s; effects %v", st.Status, tc.want, r.effects())
			}
		})
	}
}

// A parent that parks while it undoes the children of a fork that
// failed, and is resumed, undoes the children still to undo before the
// steps before the fork: the park keeps the fork's undo list (UndoNext).
// Child 0 below succeeded and must be undone, or the saga ends
// compensated with left's effect in place.
func TestResumeAfterAParkedUndoUndoesTheChildrenLeft(t *testing.T) {
	t.Parallel()
	r := newHandRig(t)
	plan := mustCompile(t, `
saga: parked
steps:
  - id: three
    parallel:
      - steps: [{id: left, action: svc.left, compensate: {action: svc.left_undo}}]
      - steps: [{id: mid, action: svc.mid, compensate: {action: svc.mid_undo, retry: {attempts: 1}}}]
      - steps: [{id: right, action: svc.right}]
`)
	ctx := context.Background()
	undoFails := true
	r.actions.fail = func(c saga.Call) bool {
		return c.Step == "right" || (c.Step == "mid" && c.Compensation && undoFails)
	}
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("after mid's undo failed: %s, want compensation_failed", st.Status)
	}
	// The operator fixes mid's undo and resumes the child, then the parent.
	undoFails = false
	// (The child's end reaches the parent parked on it, which goes on by
	// itself: the parent's resume then finds nothing parked.)
	for _, id := range []string{"p.three.1.1", "p"} {
		if _, err := r.coord.Resume(ctx, id); err != nil && !(id == "p" && errors.Is(err, saga.ErrInvalidEvent)) {
			t.Fatalf("resume %s: %v", id, err)
		}
		r.drain()
	}
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("after the resumes: %s, want compensated", st.Status)
	}
	if got := r.actions.called("p.three.1.0/left.compensate"); len(got) == 0 {
		t.Errorf("child 0 (left) succeeded and was never undone: calls %v, child %s", r.actions.calls, r.get("p.three.1.0").Status)
	}
}
