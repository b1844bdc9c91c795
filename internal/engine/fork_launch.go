package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// launch creates child k of the fork parent waits on and sends its first
// messages; stopped creates it already cancelled (a licensed child of a
// fork that failed before it was created). A child that exists is not
// created again: if it is still at its first version, its outbox is sent
// again (a launcher may have died between the create and the send).
func (c *Coordinator) launch(ctx context.Context, parent *saga.State, plan *saga.Plan, k int, stopped bool) error {
	childPlan, cs, err := plan.Launch(parent, k)
	if err != nil {
		return err
	}
	id := durable.ChildID(parent.SagaID, cs.Link.Step, cs.Link.Seq, k)
	if !stopped && k >= cs.Link.Lanes {
		// A lane's next child: its license was the count of the child
		// before it. The first children, though, are launched from the
		// parent's outbox, which may be sent again after a child failed:
		// each reads the fork record first.
	} else if !stopped {
		rec, err := c.cfg.Store.ForkGet(ctx, &durable.ForkGetParams{Key: forkKey(&cs.Link)})
		switch {
		case err == nil:
			stopped = rec.Failed >= 0
		case !errors.Is(err, durable.ErrNotFound):
			return fmt.Errorf("child %s: %w", id, err)
		}
	}
	cs.Stopped = stopped
	if childPlan != plan {
		c.cfg.Plans.Add(childPlan)
		if err := c.cfg.Plans.ensureStored(ctx, c.cfg.Store, childPlan); err != nil {
			return fmt.Errorf("child %s: store definition: %w", id, err)
		}
	}
	var secret []byte
	if childPlan.HasCallbacks() {
		secret = make([]byte, 16)
		if _, err := rand.Read(secret); err != nil {
			return fmt.Errorf("child %s: callback secret: %w", id, err)
		}
	}
	var h heard
	ev := saga.Event{Kind: saga.EventStart, Now: c.cfg.Clock.Now(), Rand: c.cfg.Rand(), SagaID: id, Input: cs.Input, Secret: secret, Child: cs, OffloadBytes: c.offloadBytes()}
	st, rec, err := c.first(ctx, func(st *saga.State, limit int) error {
		ev.StoreLimit, ev.OnStep = limit, c.observer(childPlan, &h, id, st, nil)
		return childPlan.Advance(st, ev)
	}, parent.Trace)
	if err != nil {
		return fmt.Errorf("child %s: %w", id, err)
	}
	err = c.create(ctx, id, rec, &h)
	if errors.Is(err, durable.ErrExists) {
		_, have, havePlan, err := c.load(ctx, id)
		if err != nil {
			return err
		}
		if err := checkChild(have, &cs.Link, id); err != nil {
			return err
		}
		if stopped && !have.Status.Final() {
			_, err := c.Cancel(ctx, id)
			if errors.Is(err, saga.ErrInvalidEvent) {
				return nil // it ended meanwhile
			}
			return err
		}
		return c.launchedBefore(ctx, have, havePlan)
	}
	if err != nil {
		return fmt.Errorf("child %s: %w", id, err)
	}
	if err := c.sendOutbox(ctx, st, childPlan); err != nil {
		return err
	}
	if cur, ok := parent.Pending(); ok && cur.Fork && plan.ForkTakesSignals(cur.Step) {
		return c.handLateKept(ctx, parent.SagaID, plan, k, id, cs.Kept)
	}
	return nil
}

// handLateKept gives child k, just created with the signals the parent
// kept for it as read before, those the parent kept for it since: a
// signal routed while the child was being created found it missing and
// was kept by the parent for it (engine route), after the launcher read
// the parent. The router reads the child again after its keep, and the
// launcher the parent after its create: whichever wrote second sees the
// other's write, so the signal reaches the child at least once (a second
// time is a duplicate, by its id). Only a fork whose children may take
// signals is read again (launch).
func (c *Coordinator) handLateKept(ctx context.Context, parentID string, plan *saga.Plan, k int, id string, had []saga.Delivery) error {
	_, parent, _, err := c.load(ctx, parentID)
	if err != nil {
		return fmt.Errorf("child %s: read its parent for signals kept for it: %w", id, err)
	}
	for _, d := range plan.HandedTo(parent, k) {
		if slices.ContainsFunc(had, func(h saga.Delivery) bool { return h.ID == d.ID }) {
			continue
		}
		if _, err := c.deliver(ctx, id, d, d.Payload, "signal", false); err != nil && !errors.Is(err, saga.ErrNotReceiving) {
			return fmt.Errorf("child %s: give it signal %s its parent kept for it: %w", id, d.Signal, err)
		}
	}
	return nil
}

// relaunch is launch for an outbox sent again: it reads child k first,
// and most often finds it, where launch reads the fork record and tries
// a create (two requests more, the create billed though it fails). A
// child found is left to go on (launchedBefore), also when the fork has
// failed since: cancelling it is the failure's work (the count of the
// failed child, or the stop, cancels every lane's child until its
// message is handled), not every re-send's, so that a re-send after a
// failure does not cancel every child again, each cancel sending its
// outbox again too.
func (c *Coordinator) relaunch(ctx context.Context, parent *saga.State, plan *saga.Plan, k int) error {
	_, cs, err := plan.Launch(parent, k)
	if err != nil {
		return err
	}
	id := durable.ChildID(parent.SagaID, cs.Link.Step, cs.Link.Seq, k)
	_, have, havePlan, err := c.load(ctx, id)
	switch {
	case errors.Is(err, errSagaMissing):
		return c.launch(ctx, parent, plan, k, false)
	case err != nil:
		return fmt.Errorf("child %s: %w", id, err)
	}
	if err := checkChild(have, &cs.Link, id); err != nil {
		return err
	}
	return c.launchedBefore(ctx, have, havePlan)
}

// checkChild makes sure that the saga found under a child's id is that
// child.
func checkChild(have *saga.State, link *saga.ParentLink, id string) error {
	if l := have.Parent; l == nil || l.ID != link.ID || l.Step != link.Step || l.Seq != link.Seq || l.Index != link.Index {
		return fmt.Errorf("%w: child %d of %s's %s: its id %s is taken by another saga", ErrDamagedState, link.Index, link.ID, link.Step, id)
	}
	return nil
}

// launchedBefore is a launch that finds its child: if the child is still
// at its first version, its outbox is sent again (its launcher may have
// died between the create and the send).
func (c *Coordinator) launchedBefore(ctx context.Context, have *saga.State, plan *saga.Plan) error {
	if have.Version == 1 && !have.UpdatedAt.After(c.cfg.Clock.Now().Add(-launchResendAfter)) {
		// Created, and idle since: its first send may have been lost
		// (its launcher died). A launch repeated sooner is a duplicate,
		// and sends nothing: repeats never multiply messages.
		return c.resendOutbox(ctx, have, plan)
	}
	return nil
}

// launchResendAfter is how long a child must have been idle at its first
// version for a repeated launch to send its first messages again.
const launchResendAfter = 0

// launchFor launches child k of the fork l names, from its parent
// (stopped: already cancelled).
func (c *Coordinator) launchFor(ctx context.Context, l *saga.ParentLink, k int, stopped bool) error {
	_, parent, plan, err := c.load(ctx, l.ID)
	if err != nil {
		return err
	}
	cur, ok := parent.Pending()
	if !ok || !cur.Fork || cur.Compensating || cur.Version != l.Version {
		return nil // the parent has joined: nothing more starts
	}
	return c.launch(ctx, parent, plan, k, stopped)
}
