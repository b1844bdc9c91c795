package saga

import (
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// CallsAction names the action a pending cursor calls when it runs: its
// step's action, its compensation's action, or, finding out an unknown
// outcome, the step's action again. Empty for a fork, a wait or a fork's
// undo, which call none. The engine matches it against the operators'
// pauses; it allocates nothing. The cursor must fit the plan
// (CheckState).
func (p *Plan) CallsAction(cur Cursor) string {
	if cur.Fork || cur.Wait || cur.Step < 0 || cur.Step >= len(p.steps) {
		return ""
	}
	s := p.steps[cur.Step]
	switch {
	case cur.Compensating && cur.Unknown:
		return s.Action
	case cur.Compensating && s.comp == nil:
		return ""
	case cur.Compensating:
		return s.comp.action
	}
	return s.Action
}

// deferredPastDeadline reports whether st has a forward action pending,
// and no cancel, past the saga's deadline at now: what a deferred attempt
// needs for its deadline to fire (Event.Deferred).
func (st *State) deferredPastDeadline(now time.Time) bool {
	cur, ok := st.Pending()
	return ok && !cur.Compensating && !cur.Wait && !cur.Fork && !st.CancelRequested && st.Status == durable.StatusRunning &&
		!st.Deadline.IsZero() && !now.Before(st.Deadline)
}
