package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// sweepFork sends again what the children of the fork parent waits on
// need to go on: a launch the parent's outbox holds and no one made, the
// outbox of a lane's current child idle since before idleSince (its
// ended message, if it ended and was not counted), and, for a child that
// itself waits on a fork, the same one level down. It adds to res what
// it sent again, and the branches and iterations it left for an operator
// (sent again maxResends times at their version: a child saga is listed,
// and the sweep's listing counts it).
func (c *Coordinator) sweepFork(ctx context.Context, parent *saga.State, idleSince time.Time, depth, maxResends int, res *SweepResult) error {
	plan, err := c.cfg.Plans.Get(ctx, parent.DefinitionHash)
	if err != nil {
		return err
	}
	l, rec, err := c.forkOf(ctx, parent, plan)
	if err != nil {
		return err
	}
	if rec.Failed < 0 && (parent.CancelRequested || parent.Failure != nil) && !parent.UpdatedAt.After(idleSince) {
		// A cancel or the deadline stopped the fork, and its stop was lost.
		if err := c.stopFork(ctx, parent, plan); err != nil {
			return err
		}
		res.Resent++
		return nil
	}
	if closed(rec, l) {
		// Every child has ended, and the parent still waits: its join was
		// lost (a dead-lettered message, say).
		join := durable.Message{SagaID: l.ID, Version: l.Version, Queue: durable.QueueAdvance, Kind: durable.KindJoin, Step: l.Step, Attempt: 1}
		if err := c.send(ctx, []durable.Message{join}); err != nil {
			return err
		}
		res.Resent++
		return nil
	}
	for j := range l.Lanes {
		k := j + rec.Count(j)*l.Lanes
		if k >= l.Children || rec.IsStopped(j) {
			continue
		}
		childRec, child, childPlan, err := c.load(ctx, durable.ChildID(l.ID, l.Step, l.Seq, k))
		switch {
		case errors.Is(err, errSagaMissing):
			if parent.UpdatedAt.After(idleSince) {
				continue // its launcher may be at work
			}
			if err := c.launch(ctx, parent, plan, k, rec.Failed >= 0); err != nil {
				return err
			}
			res.Resent++
			continue
		case err != nil:
			return err
		}
		if rec.Failed >= 0 && !child.CancelRequested && (child.Status == durable.StatusRunning || child.Status == durable.StatusWaiting || child.Status == durable.StatusHeld) && !parent.UpdatedAt.After(idleSince) {
			// The fork failed and this child runs on (or is held, which
			// its parent waits on as long): the stop that was to cancel
			// it was lost (dead-lettered).
			if _, err := c.Cancel(ctx, child.SagaID); err != nil && !errors.Is(err, saga.ErrInvalidEvent) {
				return err
			}
			res.Resent++
			continue
		}
		if cur, ok := child.Pending(); ok && cur.Fork && !cur.Compensating && !child.Status.Final() && depth < lang.MaxForkDepth {
			if err := c.sweepFork(ctx, child, idleSince, depth+1, maxResends, res); err != nil {
				return err
			}
			continue
		}
		if len(child.Outbox) == 0 || child.UpdatedAt.After(idleSince) {
			continue // busy
		}
		if childRec.Resends >= maxResends {
			// Sent again enough at this version: an operator takes it.
			if !l.Saga { // a child saga is listed: the sweep's listing counts it
				res.LeftForOperator++
				c.log.LogAttrs(ctx, slog.LevelWarn, "sweep left a fork's child for an operator", slog.String("saga_id", child.SagaID),
					slog.String("parent", parent.SagaID), slog.Uint64("version", child.Version), slog.String("status", string(child.Status)),
					slog.Int("resends", childRec.Resends))
			}
			continue
		}
		// Claimed first, as the sweep claims a saga's re-send: sweeps
		// running at once send it once, and a version is sent again at
		// most maxResends times, so that sweeps never flood a fork.
		claim := &durable.SagaSetResendsParams{SagaID: child.SagaID, Version: child.Version, From: childRec.Resends, To: childRec.Resends + 1}
		if err := c.cfg.Store.SagaSetResends(ctx, claim); errors.Is(err, durable.ErrConflict) {
			continue
		} else if err != nil {
			return err
		}
		if err := c.resendOutbox(ctx, child, childPlan); err != nil {
			// Given back, as the sweep gives a saga's back: trouble
			// sending does not use up the re-sends of a child whose
			// message never left.
			back := &durable.SagaSetResendsParams{SagaID: child.SagaID, Version: child.Version, From: claim.To, To: claim.From}
			if berr := c.cfg.Store.SagaSetResends(ctx, back); berr != nil && !errors.Is(berr, durable.ErrConflict) {
				err = fmt.Errorf("%w (and the re-send stays counted: %w)", err, berr)
			}
			return err
		}
		res.Resent++
	}
	return nil
}
