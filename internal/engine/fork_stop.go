package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// cancelLanes cancels the current child of every lane of a failed fork
// that has not stopped; a licensed child not created yet is created
// cancelled. A lane that fails does not stop the others. When some fail,
// the record keeps the lanes done (ForkCancelled), and the next
// delivery does only the lanes left: with many lanes, a stop that did
// them all again on each delivery could fail on one lane or another every
// time, until its message was dead-lettered. When none fails, it records
// every lane, so that a repeat of the message does none again. A lane it
// records stays done: after the fork failed, its current child changes
// only to one created cancelled (launchFor, from a repeated count).
func (c *Coordinator) cancelLanes(ctx context.Context, l *saga.ParentLink, rec *durable.ForkRecord) error {
	var parent *saga.State
	var plan *saga.Plan
	var done []int
	var errs []error
	for j := range l.Lanes {
		k := j + rec.Count(j)*l.Lanes
		if k >= l.Children || rec.IsStopped(j) || rec.IsCancelled(j) {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err) // out of time: keep what is done
			break
		}
		id := durable.ChildID(l.ID, l.Step, l.Seq, k)
		joined, err := c.cancelChild(ctx, l, k, id, &parent, &plan)
		if errors.Is(err, durable.ErrConflict) {
			// Not the handler's at-once retry of the whole message (it
			// would do the other lanes again): the message comes back.
			err = fmt.Errorf("lost to other writers: %v", err)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("child %s: %w", id, err))
			continue
		}
		if joined {
			return errors.Join(errs...) // the parent has joined: nothing more is launched, nothing to record
		}
		done = append(done, j)
	}
	if len(errs) == 0 {
		if len(done) > 0 {
			// Every lane done: recorded, so that a repeat of the message
			// (a lost delete, a duplicate) does none again. One write,
			// no read; if it fails, a repeat only does the lanes again.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
			defer cancel()
			if err := c.cfg.Store.ForkCancelled(rctx, &durable.ForkCancelledParams{Key: forkKey(l), Every: l.Lanes}); err != nil {
				c.log.WarnContext(ctx, "fork stop: every lane done, not recorded", "fork", forkKey(l), "error", err)
			}
		}
		return nil
	}
	if len(done) > 0 {
		// Recorded even when the invocation's time ran out on a lane.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		if err := c.cfg.Store.ForkCancelled(rctx, &durable.ForkCancelledParams{Key: forkKey(l), Lanes: done}); err != nil {
			errs = append(errs, fmt.Errorf("record the lanes cancelled: %v", err))
		}
	}
	return errors.Join(errs...)
}

// recordTimeout bounds cancelLanes' record of the lanes it has done, made
// past the context's end if need be: a read and a write.
const recordTimeout = 2 * time.Second

// cancelChild cancels child k (id) of the failed fork l, or creates it
// cancelled if its launch is licensed and was not made, reading the
// parent into *parent and *plan once. joined: the parent no longer waits
// on the fork.
func (c *Coordinator) cancelChild(ctx context.Context, l *saga.ParentLink, k int, id string, parent **saga.State, plan **saga.Plan) (joined bool, err error) {
	_, err = c.Cancel(ctx, id)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, saga.ErrInvalidEvent):
		// It has ended, yet its lane was not counted: its end's message
		// may have been lost with its launcher. Send it again.
		_, child, childPlan, err := c.load(ctx, id)
		if err != nil {
			return false, err
		}
		if child.Status.Final() {
			return false, c.resendOutbox(ctx, child, childPlan)
		}
		return false, nil
	case !errors.Is(err, durable.ErrNotFound):
		return false, err
	}
	if *parent == nil {
		if _, *parent, *plan, err = c.load(ctx, l.ID); err != nil {
			return false, err
		}
	}
	if cur, ok := (*parent).Pending(); !ok || !cur.Fork || cur.Version != l.Version {
		return true, nil
	}
	return false, c.launch(ctx, *parent, *plan, k, true)
}

// stop handles KindStop: the saga, waiting on the fork at msg.Step, was
// cancelled or passed its deadline, and its fork stops. A message of its
// own, not work done by whoever sends the outbox that holds it: a cancel
// of a saga waiting on a fork is then one write and one send, and a
// failed fork's cancels of its children (each one of those, when it waits
// on a fork too) do not stop the forks below them inline, level after
// level, on every delivery of the message that cancelled them. One
// message reaches one fork's lanes, however deep the forks nest.
func (c *Coordinator) stop(ctx context.Context, msg durable.Message) (Outcome, error) {
	_, st, plan, err := c.load(ctx, msg.SagaID)
	ctx = c.traceMessage(ctx, st)
	if errors.Is(err, errSagaMissing) {
		return "", fmt.Errorf("%w: %w", durable.ErrMalformedMessage, err)
	}
	if err != nil {
		return "", err
	}
	if st.Version < msg.Version {
		return "", fmt.Errorf("%w: saga %s is at version %d, behind stop version %d: did the store lose a write?", ErrDamagedState, msg.SagaID, st.Version, msg.Version)
	}
	// A saga stopped from outside never forks forward again (no catch
	// takes a cancel or the deadline): while it waits on the fork the
	// message names, the stop is still to be done, idempotently.
	cur, ok := st.Pending()
	if !ok || !cur.Fork || cur.Compensating || plan.StepID(cur.Step) != msg.Step || !(st.CancelRequested || st.Failure != nil) {
		return HandledStale, nil // joined since, or stopped by nothing
	}
	if err := c.stopFork(ctx, st, plan); err != nil {
		return "", fmt.Errorf("saga %s: stop fork %s: %w", st.SagaID, msg.Step, err)
	}
	c.logHandled(ctx, msg, st, HandledStep, 0)
	return HandledStep, nil
}

// stopFork records in the fork's record that the fork st waits on failed
// from outside (a cancel, the deadline), and cancels its running children.
func (c *Coordinator) stopFork(ctx context.Context, st *saga.State, plan *saga.Plan) error {
	cur, ok := st.Pending()
	if !ok || !cur.Fork || cur.Compensating {
		return nil
	}
	_, cs, err := plan.Launch(st, 0)
	if err != nil {
		return err
	}
	l := &cs.Link
	// Failed names no child (l.Children is past the last): the failure is
	// the parent's own, a cancel or its deadline.
	rec, err := c.cfg.Store.ForkFail(ctx, &durable.ForkFailParams{Key: forkKey(l), Child: l.Children})
	if err != nil {
		return err
	}
	if err := c.cancelLanes(ctx, l, rec); err != nil {
		return err
	}
	if closed(rec, l) {
		// Every child had ended: the join may have gone before the stop.
		join := durable.Message{SagaID: l.ID, Version: l.Version, Queue: durable.QueueAdvance, Kind: durable.KindJoin, Step: l.Step, Attempt: 1}
		return c.send(ctx, []durable.Message{join})
	}
	return nil
}
