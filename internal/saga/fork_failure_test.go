package saga_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// What a fork's failure does to its parent: which failures the fork's
// catch takes, and how a cancel meets the undo of a failed fork.

// A cancel that lands while a failed fork's succeeded children are being
// undone (the saga running: a catch takes the failure after) replaces
// the saga's version, and with it the outbox of the one before, which
// may never have been sent (a crash after the join's write): the cancel
// sends the undo of the child being undone again, so that the saga moves
// on either way (the child's undo is idempotent).
func TestCancelWhileAFailedForkIsUndoneSendsTheUndoAgain(t *testing.T) {
	t.Parallel()
	p, st := startFiles(t, map[string]string{"main.yaml": `saga: m
steps:
  - id: both
    parallel:
      - steps: [{id: a, action: w, compensate: {action: u}}]
      - steps: [{id: b, action: w, compensate: {action: u}}]
    catch: [{errors: [Rejected], next: fallback}]
  - id: fallback
    action: w
`})
	cur, _ := st.Pending()
	// Child 0 fails, child 1 succeeded: the join undoes child 1.
	if err := p.Advance(st, saga.Event{Kind: saga.EventJoin, Now: t0.Add(1e9), Join: &saga.Join{Version: cur.Version, Failure: &saga.StepError{Step: "a", Type: "Rejected", Message: "no"}, Succeeded: []int{1}}}); err != nil {
		t.Fatal(err)
	}
	undo := durable.Message{SagaID: durable.ChildID("s-1", "both", cur.Seq, 1), Queue: durable.QueueCompensate, Kind: durable.KindUndo, Step: "both", Attempt: 1}
	if !hasUndo(st.Outbox, undo) {
		t.Fatalf("after the join: outbox %+v, want the undo of child 1", st.Outbox)
	}
	// The join's write landed, its outbox was never sent; a cancel lands.
	if err := p.Advance(st, saga.Event{Kind: saga.EventCancel, Now: t0.Add(2e9)}); err != nil {
		t.Fatal(err)
	}
	if !st.CancelRequested || !hasUndo(st.Outbox, undo) {
		t.Fatalf("after the cancel (cancel requested %v): outbox %+v, want the undo of child 1 again", st.CancelRequested, st.Outbox)
	}
}

func hasUndo(out []durable.Message, want durable.Message) bool {
	for _, m := range out {
		if m.SagaID == want.SagaID && m.Queue == want.Queue && m.Kind == want.Kind && m.Step == want.Step {
			return true
		}
	}
	return false
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
	t.Parallel()
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
	t.Parallel()
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

// An action's result, or a call of its action, means nothing to a saga
// waiting on a fork, forward or while the fork's children are undone:
// refused (ErrInvalidEvent, a damaged or misrouted message), never a
// panic.
func TestActionEventsForAForkAreRefused(t *testing.T) {
	t.Parallel()
	p, st := startFiles(t, map[string]string{"main.yaml": `saga: m
steps:
  - id: both
    parallel:
      - steps: [{id: a, action: w, compensate: {action: u}}]
      - steps: [{id: b, action: w, compensate: {action: u}}]
  - id: after
    action: w
`})
	result := saga.Event{Kind: saga.EventResult, Now: t0.Add(1e9), Output: map[string]any{}}
	if err := p.Advance(st, result); !errors.Is(err, saga.ErrInvalidEvent) {
		t.Fatalf("a result while the fork runs: %v, want ErrInvalidEvent", err)
	}
	cur, _ := st.Pending()
	// Child 0 failed, child 1 succeeded: the join undoes child 1.
	if err := p.Advance(st, saga.Event{Kind: saga.EventJoin, Now: t0.Add(2e9), Join: &saga.Join{Version: cur.Version, Failure: &saga.StepError{Step: "a", Type: "Rejected", Message: "no"}, Succeeded: []int{1}}}); err != nil {
		t.Fatal(err)
	}
	if cur, _ := st.Pending(); !cur.Fork || !cur.Compensating {
		t.Fatalf("after the join: pending %+v, want the fork's undo", cur)
	}
	version := st.Version
	for _, ev := range []saga.Event{result, {Kind: saga.EventResult, Now: t0.Add(3e9), Err: saga.NewError("Boom", "no")}} {
		if err := p.Advance(st, ev); !errors.Is(err, saga.ErrInvalidEvent) {
			t.Errorf("a result while the fork's children are undone (err %v): %v, want ErrInvalidEvent", ev.Err, err)
		}
	}
	if st.Version != version {
		t.Errorf("a refused result moved the saga to version %d, from %d", st.Version, version)
	}
	if _, err := p.Call(st, t0.Add(4e9)); err == nil {
		t.Error("the call of a fork's undo: no error, want one (a fork calls no action)")
	}
}
