package saga

import (
	"fmt"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// Record encodes st as a store record into buf, within the size a state
// of its status may have: ErrUnstorable when it cannot be encoded,
// durable.ErrTooLarge when it is too large.
func (st *State) Record(buf []byte) (durable.SagaRecord, error) { return st.record(buf, nil) }

func (st *State) record(buf []byte, off *Offload) (durable.SagaRecord, error) {
	b, err := st.appendWith(buf, off)
	if err != nil {
		return durable.SagaRecord{}, fmt.Errorf("%w: saga %s: %w", ErrUnstorable, st.SagaID, err)
	}
	limit := MaxStateBytes
	if st.Failure != nil && st.Status != durable.StatusRunning {
		limit = maxSettledStateBytes
	}
	if len(b) > limit {
		return durable.SagaRecord{}, fmt.Errorf("%w: saga %s would be %d bytes, over %d", durable.ErrTooLarge, st.SagaID, len(b), limit)
	}
	return durable.SagaRecord{SagaID: st.SagaID, Version: st.Version, Status: st.Status, Name: st.Name, DefinitionHash: st.DefinitionHash,
		CreatedAt: st.CreatedAt, StatusSince: st.StatusSince, UpdatedAt: st.UpdatedAt, WakeAt: st.WakeAt(), State: b, Received: st.Received,
		Child: st.Parent != nil, Unlisted: st.Parent != nil && !st.Parent.Saga}, nil
}

// CheckState reports what in st does not fit the plan, so that a damaged
// item is an error rather than a panic.
func (p *Plan) CheckState(st *State) error {
	if !st.Status.Valid() {
		return fmt.Errorf("status %q", st.Status)
	}
	for _, c := range st.Cursors {
		if c.Step < 0 || c.Step >= len(p.steps) {
			return fmt.Errorf("a cursor at step %d of %d", c.Step, len(p.steps))
		}
		if c.Attempt < 1 {
			return fmt.Errorf("a cursor at attempt %d", c.Attempt)
		}
		s := p.steps[c.Step]
		if c.Fork {
			if !lang.IsFork(s.Kind) || c.Children < 1 || c.Children > durable.MaxForkChildren || !c.Compensating && (c.Lanes < 1 || c.Lanes > c.Children) ||
				c.Child < 0 || c.Child >= c.Children || c.Wait {
				return fmt.Errorf("a fork cursor at step %s (%d children, %d at once, child %d)", s.ID, c.Children, c.Lanes, c.Child)
			}
			if s.Kind == lang.KindForeach && !c.Compensating && st.ForkItems != nil && len(st.ForkItems) != c.Children || s.Kind == lang.KindSaga && !c.Compensating && len(st.ForkItems) != 1 {
				return fmt.Errorf("a fork at step %s of %d children with %d items", s.ID, c.Children, len(st.ForkItems))
			}
			continue
		}
		if c.Wait {
			if (s.Kind != lang.KindWait && s.Kind != lang.KindAwait && s.Callback == nil) || c.Compensating || c.Due.IsZero() {
				return fmt.Errorf("a timer at step %s, which is no wait, await or callback", s.ID)
			}
			continue
		}
		if c.Held && (c.Compensating || st.Status != durable.StatusHeld) || c.Budget < 0 || c.Budget >= c.Attempt {
			return fmt.Errorf("a held cursor at step %s (attempt %d, budget from %d) of a %s saga", s.ID, c.Attempt, c.Budget, st.Status)
		}
		if s.Kind != lang.KindAction || (c.Compensating && s.comp == nil) {
			return fmt.Errorf("a cursor at step %s, which has no such action", s.ID)
		}
	}
	for _, f := range st.Forks {
		if f.Step < 0 || f.Step >= len(p.steps) || !lang.IsFork(p.steps[f.Step].Kind) || f.Children < 1 || f.Children > durable.MaxForkChildren || f.Lanes < 0 || f.Lanes > f.Children || f.Seq == 0 || f.Seq > st.Seq {
			return fmt.Errorf("a fork visit of step %d (visit %d, %d children)", f.Step, f.Seq, f.Children)
		}
	}
	for _, d := range st.Kept {
		if d.Signal == "" && (d.Step < 0 || d.Step >= len(p.steps) || p.steps[d.Step].Callback == nil) {
			return fmt.Errorf("a kept callback completion of step %d, which has no callback", d.Step)
		}
	}
	for _, c := range st.Stack {
		switch {
		case c.Step < 0 || c.Step >= len(p.steps):
			return fmt.Errorf("a completion of step %d of %d", c.Step, len(p.steps))
		case c.Children > 0 && !lang.IsFork(p.steps[c.Step].Kind):
			return fmt.Errorf("a completion of %d children of step %s, which is no fork", c.Children, p.steps[c.Step].ID)
		case c.Children == 0 && p.steps[c.Step].comp == nil:
			return fmt.Errorf("a completion of step %s, which has no compensation", p.steps[c.Step].ID)
		}
	}
	for _, k := range st.UndoNext {
		if k < 0 || k >= durable.MaxForkChildren {
			return fmt.Errorf("child %d to undo", k)
		}
	}
	if l := st.Parent; l != nil && (!durable.ValidSagaID(l.ID) || l.Lanes < 1 || l.Lanes > l.Children || l.Index < 0 || l.Index >= l.Children || l.Children > durable.MaxForkChildren) {
		return fmt.Errorf("a parent link to %q (child %d of %d, %d at once)", l.ID, l.Index, l.Children, l.Lanes)
	}
	return nil
}
