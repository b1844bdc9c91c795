package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// An attempt whose outcome is unknown inside a fork's branch: found out
// when the parent undoes or cancels the branch, and not asked again on
// the branch's own run.

const timeoutForkSaga = `
saga: unknownfork
steps:
  - id: f0
    action: ledger.do
    compensate: {action: ledger.undo}
  - id: fan
    parallel:
      - steps:
          - id: p1
            action: ledger.do
            compensate: {action: ledger.undo}
      - steps:
          - id: p2
            action: ledger.do
            retry: {attempts: 3, backoff: 1m, max_backoff: 1m}
            compensate: {action: ledger.undo}
          - id: p3
            action: ledger.do
            compensate: {action: ledger.undo}
  - id: z
    action: ledger.do
`

// A branch's attempt that ran into its deadline after its effect, while
// the parent is cancelled, is found out in the branch as in a saga.
func TestUnknownOutcomeInABranchIsFoundOutWhenTheParentIsCancelled(t *testing.T) {
	t.Parallel()
	for _, when := range []string{"while the attempt runs", "while its retry waits"} {
		t.Run(when, func(t *testing.T) {
			done := map[string]bool{}
			var parent string
			var e *rig
			e = newEdgeRig(t, timeoutForkSaga, func(ctx context.Context, c saga.Call) (any, error) {
				if c.Step != "p2" || c.Compensation {
					return map[string]any{"id": c.Step}, nil
				}
				if done[c.IdempotencyKey] {
					return map[string]any{"id": "p2"}, nil
				}
				done[c.IdempotencyKey] = true
				if when == "while the attempt runs" {
					if _, err := e.coord.Cancel(context.Background(), parent); err != nil {
						return nil, err
					}
				}
				return nil, saga.NewError(lang.ErrorTypeTimeout, "p2 ran into its deadline after its effect")
			})
			parent = "s-1"
			e.start(parent, nil)
			if when == "while its retry waits" {
				for len(done) == 0 {
					d, ok := e.receive()
					if !ok {
						t.Fatal("no message before p2 ran")
					}
					if _, err := e.coord.Handle(context.Background(), d.Body); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := e.coord.Cancel(context.Background(), parent); err != nil {
					t.Fatal(err)
				}
			}
			e.drain()
			st := e.get(parent)
			if st.Status != durable.StatusCompensated {
				t.Fatalf("status %s (failure %v)", st.Status, st.Failure)
			}
			e.checkCompensated(t, "f0", "p1", "p2", "p3")
			if n := strings.Count(e.succeeded(), "p2"); n != 2 {
				t.Fatalf("calls %q: want p2 found out and compensated", e.succeeded())
			}
		})
	}
}

const forkUnknownSaga = `
saga: forkunknown
steps:
  - id: fan
    parallel:
      - steps:
          - id: p1
            action: ledger.do
            retry: {attempts: 1}
            catch: [{errors: [Timeout], next: p1b}]
            compensate: {action: ledger.undo, retry: {attempts: 1}}
          - id: p1b
            action: ledger.do
      - steps:
          - id: p2
            action: ledger.do
            compensate: {action: ledger.undo}
  - id: after
    action: ledger.fail
`

// A branch whose step timed out after its effect, a catch took it, and the
// branch succeeded: when the parent compensates later, it undoes the
// branch, which finds the step out and compensates it. When the call that
// finds out gets no answer, the branch parks and so does the parent; the
// parent's resume resumes the branch, which asks again.
func TestUnknownOutcomeInASucceededBranchIsFoundOutWhenTheParentUndoesIt(t *testing.T) {
	t.Parallel()
	for _, park := range []bool{false, true} {
		name := "answered"
		if park {
			name = "parked, then the parent resumed"
		}
		t.Run(name, func(t *testing.T) {
			p1 := 0
			noAnswer := park
			e := newEdgeRig(t, forkUnknownSaga, func(ctx context.Context, c saga.Call) (any, error) {
				switch {
				case c.Step == "after":
					return nil, saga.Permanent(saga.NewError("Rejected", "no"))
				case c.Step == "p1" && !c.Compensation:
					p1++
					if p1 == 1 || noAnswer {
						return nil, saga.NewError(lang.ErrorTypeTimeout, "slow")
					}
				}
				return map[string]any{"id": c.Step}, nil
			})
			e.start("s-1", nil)
			e.drain()
			if park {
				st := e.get("s-1")
				if st.Status != durable.StatusCompensationFailed {
					t.Fatalf("parent %s, want parked on its branch", st.Status)
				}
				noAnswer = false
				if _, err := e.coord.Resume(context.Background(), "s-1"); err != nil {
					t.Fatal(err)
				}
				e.drain()
			}
			st := e.get("s-1")
			if st.Status != durable.StatusCompensated {
				t.Fatalf("status %s (failure %v, compensation error %v)", st.Status, st.Failure, st.CompensationError)
			}
			e.checkCompensated(t, "p1", "p2")
			if !strings.Contains(e.succeeded(), "p1.compensate") {
				t.Fatalf("calls %q: want p1 found out and compensated", e.succeeded())
			}
		})
	}
}

// A branch parks on a step whose outcome it cannot find out, and its
// parent parks on the branch. The parent's message names the branch's
// run: skipped there, only the unknown step is skipped, and the branch's
// other completed step is still undone.
func TestUnknownOutcomeInABranchIsSkippedOnTheBranchRun(t *testing.T) {
	t.Parallel()
	src := `
saga: forkskip
steps:
  - id: fan
    parallel:
      - steps:
          - id: p0
            action: ledger.do
            compensate: {action: ledger.undo}
          - id: p1
            action: ledger.do
            retry: {attempts: 1}
            catch: [{errors: [Timeout], next: p1b}]
            compensate: {action: ledger.undo, retry: {attempts: 1}}
          - id: p1b
            action: ledger.do
      - steps:
          - id: p2
            action: ledger.do
  - id: after
    action: ledger.fail
`
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		switch {
		case c.Step == "after":
			return nil, saga.Permanent(saga.NewError("Rejected", "no"))
		case c.Step == "p1" && !c.Compensation:
			return nil, saga.NewError(lang.ErrorTypeTimeout, "slow")
		}
		return map[string]any{"id": c.Step}, nil
	})
	e.start("s-1", nil)
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusCompensationFailed || st.CompensationError == nil {
		t.Fatalf("parent %s, want parked on its branch", st.Status)
	}
	run := durable.ChildID("s-1", "fan", 1, 0)
	if !strings.Contains(st.CompensationError.Message, run) {
		t.Fatalf("parent's message %q does not name the branch's run %s", st.CompensationError.Message, run)
	}
	if _, err := e.coord.SkipCompensation(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	e.drain()
	st = e.get("s-1")
	if st.Status != durable.StatusCompensated || !strings.Contains(e.succeeded(), "p0.compensate") {
		t.Fatalf("parent %s after the branch's skip; calls: %s; want compensated with p0 undone", st.Status, e.succeeded())
	}
}
