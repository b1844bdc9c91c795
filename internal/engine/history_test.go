package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// The coordinator gives each action result its call's duration, which
// the saga's history keeps, and a cancel shows as coming from outside.
func TestHistoryThroughTheCoordinator(t *testing.T) {
	t.Parallel()
	r := newStepRig(t, "../saga/testdata/valid/order.yaml")
	r.reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		r.clock.Advance(250 * time.Millisecond) // the action's work, on the coordinator's clock
		return map[string]any{"id": c.Step + "-1", "status": "captured"}, nil
	})
	r.start("h-1", orderIn(10))
	d, _ := r.receive() // reserve
	if _, err := r.coord.Handle(context.Background(), d.Body); err != nil {
		t.Fatal(err)
	}
	if _, err := r.coord.Cancel(context.Background(), "h-1"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	st := r.get("h-1")
	if st.Status != durable.StatusCompensated {
		t.Fatalf("status %s", st.Status)
	}
	entries, err := st.HistoryEntries(r.plan)
	if err != nil {
		t.Fatal(err)
	}
	var reserved, cancelled, undone bool
	for _, e := range entries {
		switch {
		case e.Step == "reserve" && e.Outcome == saga.OutcomeCompleted:
			reserved = e.Timed && e.Took == 250*time.Millisecond
		case e.Cause == saga.EventCancel:
			cancelled = e.FromOutside() && e.Opens
		case e.Step == "reserve" && e.Compensation && e.Outcome == saga.OutcomeCompensated:
			undone = e.Timed && e.Took == 250*time.Millisecond && e.Status == durable.StatusCompensated
		}
	}
	if !reserved || !cancelled || !undone {
		t.Fatalf("reserve timed %v, cancel from outside %v, undo timed and final %v:\n%+v", reserved, cancelled, undone, entries)
	}
}
