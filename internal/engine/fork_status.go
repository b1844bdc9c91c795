package engine

import (
	"context"
	"errors"

	"github.com/lambdasaga/lambdasaga/durable"
)

// ForkStatus is where the fork a saga waits on stands (Coordinator.Fork).
type ForkStatus struct {
	Step     string // the fork step
	Children int    // how many children it starts
	Lanes    int    // how many run at once
	Ended    int    // how many have ended (counted)
	// FailedChild is the index of the first child counted as failed, or
	// Children for a failure from outside (a cancel, the deadline); -1:
	// none.
	FailedChild int
	// Current lists each lane's child that has not ended, by index.
	Current []ChildStatus
}

// ChildStatus is one child of a fork.
type ChildStatus struct {
	SagaID string         // durable.ChildID of the parent, the step, the visit and Index
	Index  int            // its index among the fork's children
	Status durable.Status // empty: licensed, not created yet
}

// Fork reports the fork the saga waits on; nil (and no error) when it
// waits on none.
func (c *Coordinator) Fork(ctx context.Context, sagaID string) (*ForkStatus, error) {
	_, st, plan, err := c.load(ctx, sagaID)
	if err != nil {
		return nil, err
	}
	cur, ok := st.Pending()
	if !ok || !cur.Fork || cur.Compensating {
		return nil, nil
	}
	l, rec, err := c.forkOf(ctx, st, plan)
	if err != nil {
		return nil, err
	}
	fs := &ForkStatus{Step: l.Step, Children: l.Children, Lanes: l.Lanes, FailedChild: rec.Failed}
	for j := range l.Lanes {
		fs.Ended += rec.Count(j)
		k := j + rec.Count(j)*l.Lanes
		if k >= l.Children || rec.IsStopped(j) {
			continue
		}
		ch := ChildStatus{SagaID: durable.ChildID(l.ID, l.Step, l.Seq, k), Index: k}
		if rec, err := c.cfg.Store.SagaGet(ctx, &durable.SagaGetParams{SagaID: ch.SagaID}); err == nil {
			ch.Status = rec.Status
		} else if !errors.Is(err, durable.ErrNotFound) {
			return nil, err
		}
		fs.Current = append(fs.Current, ch)
	}
	return fs, nil
}
