package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/lambdasaga/lambdasaga/durable"
)

// ended handles KindEnded: a child run ended. Forward, it is counted in
// its fork's record (and the count may launch the lane's next child,
// stop the lane, cancel the fork's running children, or close the fork);
// undoing, its parent goes on to the next child.
func (c *Coordinator) ended(ctx context.Context, msg durable.Message) (Outcome, error) {
	_, st, _, err := c.load(ctx, msg.SagaID)
	ctx = c.traceMessage(ctx, st)
	if errors.Is(err, errSagaMissing) {
		return "", fmt.Errorf("%w: %w", durable.ErrMalformedMessage, err)
	}
	if err != nil {
		return "", err
	}
	if st.Parent == nil {
		return "", fmt.Errorf("%w: ended of saga %s, which is no child", durable.ErrMalformedMessage, st.SagaID)
	}
	if !st.Status.Final() {
		return HandledStale, nil // resumed since: its end comes again
	}
	if st.Undoing {
		return c.undone(ctx, st)
	}
	l := st.Parent
	key, lane, m := forkKey(l), l.Index%l.Lanes, l.Index/l.Lanes
	failed := st.Status != durable.StatusSucceeded
	rec, err := c.cfg.Store.ForkCount(ctx, &durable.ForkCountParams{Key: key, Lane: lane, Count: m, Failed: failed, Child: l.Index})
	licensed := err == nil && rec.Failed < 0
	repeat := errors.Is(err, durable.ErrConflict)
	if repeat {
		// Counted before (a repeat of this message): do again what the
		// count implies, all of it idempotent.
		if rec, err = c.cfg.Store.ForkGet(ctx, &durable.ForkGetParams{Key: key}); err != nil {
			return "", err
		}
		if rec.Count(lane) <= m {
			return "", fmt.Errorf("%w: fork %s lane %d holds %d, and child %d (its %d-th) cannot be counted", ErrDamagedState, key, lane, rec.Count(lane), l.Index, m)
		}
		licensed = rec.Failed < 0
		if failed {
			// Counted when it first ended: it ends again after an
			// operator resumed it, and a parent undoing it waits for that.
			if _, err := c.undone(ctx, st); err != nil {
				return "", err
			}
		}
	}
	if err != nil {
		return "", err
	}
	switch next := l.Index + l.Lanes; {
	case repeat && next < l.Children && rec.Count(lane) == m+1 && !rec.IsStopped(lane):
		// A repeat cannot tell whether its count licensed the next child
		// (a failure may have been counted since): it makes sure the
		// next one exists, cancelled if the fork has failed since (a
		// running one is cancelled, as the failure's handler does). Its
		// end stops the lane, or counts it.
		if err := c.launchFor(ctx, l, next, rec.Failed >= 0); err != nil {
			return "", err
		}
	case repeat:
	case licensed && next < l.Children:
		if err := c.launchFor(ctx, l, next, false); err != nil {
			return "", err
		}
	}
	if !licensed && !repeat && !rec.IsStopped(lane) {
		if rec, err = c.cfg.Store.ForkStop(ctx, &durable.ForkStopParams{Key: key, Lane: lane}); err != nil {
			return "", err
		}
	}
	if rec.Failed == l.Index {
		// This child failed first: the fork's running children stop.
		if err := c.cancelLanes(ctx, l, rec); err != nil {
			return "", err
		}
	}
	if closed(rec, l) {
		join := durable.Message{SagaID: l.ID, Version: l.Version, Queue: durable.QueueAdvance, Kind: durable.KindJoin, Step: l.Step, Attempt: 1}
		if err := c.send(ctx, []durable.Message{join}); err != nil {
			return "", err
		}
	}
	c.logHandled(ctx, msg, st, HandledStep, 0)
	return HandledStep, nil
}
