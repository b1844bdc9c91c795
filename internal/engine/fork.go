package engine

import (
	"context"
	"errors"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Forks: the coordinator's half of docs/PROTOCOL.md, "Forks". A fork's
// children are sagas of their own; the parent's outbox launches them
// (KindLaunch, done here, never queued); a child's end is counted in the
// fork's record (KindEnded); the count that closes the fork sends the
// parent its join (KindJoin); a parent stopped from outside (a cancel, its
// deadline) stops its fork by a message of its own (KindStop); a parent
// that compensates undoes its children one by one (KindUndo, and
// KindEnded of an undone child).

// forkKey names the record of the fork a child belongs to.
func forkKey(l *saga.ParentLink) string { return durable.ForkKey(l.ID, l.Step, l.Seq) }

// closed reports whether every lane of the fork is exhausted or stopped.
func closed(rec *durable.ForkRecord, l *saga.ParentLink) bool {
	for j := range l.Lanes {
		if j+rec.Count(j)*l.Lanes < l.Children && !rec.IsStopped(j) {
			return false
		}
	}
	return true
}

// forkOf reads the record of the fork st waits on, with the fork's link:
// an empty record (no child counted, none failed) before its first count.
func (c *Coordinator) forkOf(ctx context.Context, st *saga.State, plan *saga.Plan) (*saga.ParentLink, *durable.ForkRecord, error) {
	_, cs, err := plan.Launch(st, 0)
	if err != nil {
		return nil, nil, err
	}
	l := &cs.Link
	rec, err := c.cfg.Store.ForkGet(ctx, &durable.ForkGetParams{Key: forkKey(l)})
	if errors.Is(err, durable.ErrNotFound) {
		rec, err = &durable.ForkRecord{Failed: -1}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return l, rec, nil
}
