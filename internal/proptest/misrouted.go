package proptest

import (
	"time"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// misrouted applies to copies of st, a run of plan, each event a damaged,
// stale or misrouted message could bring it (an action's result or error,
// a timer, a join, an undo, a child undone, a resume), and builds the call
// of its pending step. Each may be refused or may advance the copy; none
// may panic: the handler would fail the message, and every delivery of it
// after, until the dead-letter queue. The first panic is returned.
func misrouted(plan *saga.Plan, st *saga.State, now time.Time) *panicked {
	rec, err := st.Record(nil)
	if err != nil {
		return nil // the store holds what it read; nothing to copy
	}
	cur, _ := st.Pending()
	events := []saga.Event{
		{Kind: saga.EventResult, Output: map[string]any{"x": 1.0}},
		{Kind: saga.EventResult, Err: saga.NewError("Boom", "misrouted")},
		{Kind: saga.EventTimer},
		{Kind: saga.EventJoin, Join: &saga.Join{Version: cur.Version}},
		{Kind: saga.EventUndo},
		{Kind: saga.EventUndone, Undone: &saga.Undone{Child: cur.Child}},
		{Kind: saga.EventResume},
	}
	// fresh is a copy of st as the engine's load gives it.
	fresh := func() *saga.State {
		cp := &saga.State{}
		if err := cp.UnmarshalBinary(rec.State); err != nil {
			return nil
		}
		if cp.Vars == nil && !cp.Status.Final() {
			cp.Vars = map[string]any{}
		}
		return cp
	}
	for _, ev := range events {
		cp := fresh()
		if cp == nil {
			return nil
		}
		ev.Now, ev.Rand = now, 0.5
		if p := protect(func() { _ = plan.Advance(cp, ev) }); p != nil {
			return p
		}
	}
	cp := fresh()
	if cp == nil {
		return nil
	}
	return protect(func() { _, _ = plan.Call(cp, now) })
}
