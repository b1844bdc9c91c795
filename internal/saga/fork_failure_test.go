package saga_test

import (
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A cancel that lands while a failed fork's succeeded children are being
// undone (the saga running: a catch takes the failure after) replaces the saga's version, and with it the outbox of the one
// before, which may never have been sent (a crash after the join's
// write): the cancel sends the undo of the child being undone again, so
// that the saga moves on either way (the child's undo is idempotent).
func TestCancelWhileAFailedForkIsUndoneSendsTheUndoAgain(t *testing.T) {
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
