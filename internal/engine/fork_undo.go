package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// undo handles KindUndo: a child that succeeded compensates as a whole.
func (c *Coordinator) undo(ctx context.Context, msg durable.Message) (Outcome, error) {
	rec, st, plan, err := c.load(ctx, msg.SagaID)
	ctx = c.traceMessage(ctx, st)
	if errors.Is(err, errSagaMissing) {
		return "", fmt.Errorf("%w: %w", durable.ErrMalformedMessage, err)
	}
	if err != nil {
		return "", err
	}
	switch {
	case st.Parent == nil:
		return "", fmt.Errorf("%w: undo of saga %s, which is no child", durable.ErrMalformedMessage, st.SagaID)
	case st.Undoing && st.Status.Final():
		return c.undone(ctx, st) // undone already: its parent may not know
	case st.Undoing, st.Status != durable.StatusSucceeded && !st.Status.Final():
		// Being undone, or not yet ended: its own messages move it on;
		// send them again, in case the one in flight was lost (the
		// protocol drops what was handled).
		if err := c.resendOutbox(ctx, st, plan); err != nil {
			return "", err
		}
		return HandledStale, nil
	case st.Status != durable.StatusSucceeded:
		return c.undone(ctx, st) // it compensated itself: nothing of it to undo
	}
	var h heard
	s := subject{sagaID: st.SagaID, step: msg.Step, plan: plan}
	t := transition{
		advance: func(st *saga.State, limit int) error {
			return plan.Advance(st, saga.Event{Kind: saga.EventUndo, Now: c.cfg.Clock.Now(), Rand: c.cfg.Rand(), StoreLimit: limit, OffloadBytes: c.offloadBytes(), OnStep: c.observer(plan, &h, st.SagaID, st, nil)})
		},
	}
	if st, err = c.commit(ctx, &s, &t, &h, st, rec.Version); err != nil {
		return "", err
	}
	if err := c.publish(ctx, st, plan); err != nil {
		return "", err
	}
	c.logHandled(ctx, msg, st, HandledStep, 0)
	return HandledStep, nil
}

// undone tells the parent of child, which ended its undo (or had
// nothing to undo), that it may go on.
func (c *Coordinator) undone(ctx context.Context, child *saga.State) (Outcome, error) {
	l := child.Parent
	rec, st, plan, err := c.load(ctx, l.ID)
	if err != nil {
		return "", err
	}
	cur, ok := st.Pending()
	if !ok || !cur.Fork || !cur.Compensating || cur.Child != l.Index || cur.Seq != l.Seq || plan.StepID(cur.Step) != l.Step {
		// Gone on already: if this child's end wrote this version, its
		// outbox (the undo of the next child, say) may not have been sent.
		if st.Undid == l.Index+1 && st.Status != durable.StatusCompensationFailed {
			if err := c.resendOutbox(ctx, st, plan); err != nil {
				return "", fmt.Errorf("saga %s: re-send outbox of version %d: %w", st.SagaID, st.Version, err)
			}
		}
		return HandledStale, nil
	}
	u := &saga.Undone{Child: l.Index}
	if child.Status == durable.StatusCompensationFailed {
		if st.Status == durable.StatusCompensationFailed {
			return HandledStale, nil // parked on it already: nothing new
		}
		u.Parked = child.CompensationError
	}
	var h heard
	s := subject{sagaID: st.SagaID, step: l.Step, plan: plan}
	t := transition{
		advance: func(st *saga.State, limit int) error {
			return plan.Advance(st, saga.Event{Kind: saga.EventUndone, Now: c.cfg.Clock.Now(), Rand: c.cfg.Rand(), Undone: u, StoreLimit: limit, OffloadBytes: c.offloadBytes(), OnStep: c.observer(plan, &h, st.SagaID, st, nil)})
		},
	}
	if st, err = c.commit(ctx, &s, &t, &h, st, rec.Version); err != nil {
		return "", err
	}
	if err := c.publish(ctx, st, plan); err != nil {
		return "", err
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "child undone", slog.String("saga_id", st.SagaID), slog.String("child", child.SagaID))
	return HandledStep, nil
}

// resumeParkedChild resumes the child a saga parked on, when it parked
// undoing a fork's child that parked: the child's compensation goes on
// first, and the saga's undo of it waits for its end. It reports whether
// it resumed one.
func (c *Coordinator) resumeParkedChild(ctx context.Context, sagaID string) (bool, error) {
	if err := checkSagaID(sagaID); err != nil {
		return false, err
	}
	_, st, plan, err := c.load(ctx, sagaID)
	if err != nil {
		return false, err
	}
	cur, ok := st.Pending()
	if !ok || !cur.Fork || !cur.Compensating || st.Status != durable.StatusCompensationFailed {
		return false, nil
	}
	id := durable.ChildID(st.SagaID, plan.StepID(cur.Step), cur.Seq, cur.Child)
	child, err := c.Get(ctx, id)
	if err != nil || child.Status != durable.StatusCompensationFailed {
		return false, nil // nothing of it to resume: the saga's resume undoes it again
	}
	if _, err := c.resumeParkedChild(ctx, id); err != nil { // its own parked child first
		return false, err
	}
	_, err = c.apply(ctx, id, saga.EventResume, false)
	return err == nil, err
}
