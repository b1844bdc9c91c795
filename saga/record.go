package saga

import (
	"fmt"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/lang"
)

// Record encodes st as a store record into buf, within the size a state
// of its status may have: ErrUnstorable when it cannot be encoded,
// durable.ErrTooLarge when it is too large.
func (st *State) Record(buf []byte) (durable.SagaRecord, error) {
	b, err := st.AppendBinary(buf)
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
		CreatedAt: st.CreatedAt, StatusSince: st.StatusSince, UpdatedAt: st.UpdatedAt, WakeAt: st.WakeAt(), State: b, Received: st.Received}, nil
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
		if c.Wait {
			if (s.Kind != lang.KindWait && s.Kind != lang.KindAwait && s.Callback == nil) || c.Compensating || c.Due.IsZero() {
				return fmt.Errorf("a timer at step %s, which is no wait, await or callback", s.ID)
			}
			continue
		}
		if s.Kind != lang.KindAction || (c.Compensating && s.comp == nil) {
			return fmt.Errorf("a cursor at step %s, which has no such action", s.ID)
		}
	}
	for _, d := range st.Kept {
		if d.Signal == "" && (d.Step < 0 || d.Step >= len(p.steps) || p.steps[d.Step].Callback == nil) {
			return fmt.Errorf("a kept callback completion of step %d, which has no callback", d.Step)
		}
	}
	for _, c := range st.Stack {
		if c.Step < 0 || c.Step >= len(p.steps) || p.steps[c.Step].comp == nil {
			return fmt.Errorf("a completion of step %d, which has no compensation", c.Step)
		}
	}
	return nil
}
