package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
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

// sendOutbox sends st's outbox, just written: its queue messages, and the
// launches only whoever holds st can do.
func (c *Coordinator) sendOutbox(ctx context.Context, st *saga.State, plan *saga.Plan) error {
	return c.sendLaunching(ctx, st, plan, c.launch)
}

// resendOutbox sends st's outbox again (rule 3, a repeated cancel or
// resume, the sweep): its children were most likely launched the first
// time, and each launch starts by looking for its child (relaunch).
func (c *Coordinator) resendOutbox(ctx context.Context, st *saga.State, plan *saga.Plan) error {
	return c.sendLaunching(ctx, st, plan, func(ctx context.Context, st *saga.State, plan *saga.Plan, k int, _ bool) error {
		return c.relaunch(ctx, st, plan, k)
	})
}

func (c *Coordinator) sendLaunching(ctx context.Context, st *saga.State, plan *saga.Plan, launch func(context.Context, *saga.State, *saga.Plan, int, bool) error) error {
	if err := c.send(ctx, st.Outbox); err != nil {
		return err
	}
	var errs []error // one child's trouble does not keep the others from starting
	for _, m := range st.Outbox {
		if m.Kind == durable.KindLaunch {
			if err := launch(ctx, st, plan, m.Child, false); err != nil {
				errs = append(errs, fmt.Errorf("launch child %d of %s: %w", m.Child, m.Step, err))
			}
		}
	}
	return errors.Join(errs...)
}

// resend sends st's outbox again, loading its plan when a launch needs
// it.
func (c *Coordinator) resend(ctx context.Context, st *saga.State) error {
	if !hasForkWork(st.Outbox) {
		return c.send(ctx, st.Outbox)
	}
	plan, err := c.cfg.Plans.Get(ctx, st.DefinitionHash)
	if err != nil {
		return err
	}
	return c.resendOutbox(ctx, st, plan)
}

// hasForkWork reports whether an outbox holds launches, which its sender
// does itself rather than queue.
func hasForkWork(msgs []durable.Message) bool {
	for _, m := range msgs {
		if m.Kind == durable.KindLaunch {
			return true
		}
	}
	return false
}

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
	st := &saga.State{Trace: parent.Trace} // one trace for the whole tree
	ev := saga.Event{Kind: saga.EventStart, Now: c.cfg.Clock.Now(), Rand: c.cfg.Rand(), SagaID: id, Input: cs.Input, Secret: secret, Child: cs, OnStep: c.observer(childPlan, &h, id, st, nil)}
	if err := childPlan.Advance(st, ev); err != nil {
		return fmt.Errorf("child %s: %w", id, err)
	}
	rec, err := st.Record(nil)
	if unstorable(err) {
		st = &saga.State{Trace: parent.Trace}
		ev.StoreLimit, ev.OnStep = saga.MaxStateBytes, c.observer(childPlan, &h, id, st, nil)
		if err = childPlan.Advance(st, ev); err == nil {
			rec, err = st.Record(nil)
		}
	}
	if err != nil {
		return fmt.Errorf("child %s: %w", id, err)
	}
	c.writing(id)
	err = c.cfg.Store.SagaCreate(ctx, &durable.SagaCreateParams{Record: rec})
	if mayBeWritten(err) {
		h.report()
	}
	c.heardAll(id)
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

// forkKey names the record of the fork a child belongs to.
func forkKey(l *saga.ParentLink) string { return durable.ForkKey(l.ID, l.Step, l.Seq) }

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

// closed reports whether every lane of the fork is exhausted or stopped.
func closed(rec *durable.ForkRecord, l *saga.ParentLink) bool {
	for j := range l.Lanes {
		if j+rec.Count(j)*l.Lanes < l.Children && !rec.IsStopped(j) {
			return false
		}
	}
	return true
}

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
		if rec.Failed >= 0 && !child.CancelRequested && (child.Status == durable.StatusRunning || child.Status == durable.StatusWaiting) && !parent.UpdatedAt.After(idleSince) {
			// The fork failed and this child runs on: the stop that was
			// to cancel it was lost (dead-lettered).
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

// maxJoinSeen bounds the delivery ids a join gathers from the children
// for the saga to remember (it keeps its latest 32).
const maxJoinSeen = 32

// joinReadTries is how many times a join reads a child whose read was
// throttled before it gives up (and the message comes back).
const joinReadTries = 4

// maxJoinReads bounds the reads of a join's children in flight.
const maxJoinReads = 16

// join handles KindJoin: it reads the fork's children and ends the fork
// the parent waits on.
func (c *Coordinator) join(ctx context.Context, msg durable.Message) (Outcome, error) {
	rec, st, plan, err := c.load(ctx, msg.SagaID)
	ctx = c.traceMessage(ctx, st)
	if err != nil {
		return "", err
	}
	cur, ok := st.Pending()
	if !ok || !cur.Fork || cur.Compensating || cur.Version != msg.Version || st.Status != durable.StatusWaiting {
		// Joined already: if that join wrote this version, its outbox may
		// not have been sent (a repeat of this message is how it is sent
		// again, as rule 3).
		if st.Joined == msg.Version {
			if err := c.resendOutbox(ctx, st, plan); err != nil {
				return "", fmt.Errorf("saga %s: re-send outbox of version %d: %w", st.SagaID, st.Version, err)
			}
		}
		return HandledStale, nil
	}
	_, cs, err := plan.Launch(st, 0)
	if err != nil {
		return "", err
	}
	l := &cs.Link
	fork, err := c.cfg.Store.ForkGet(ctx, &durable.ForkGetParams{Key: forkKey(l)})
	if err != nil {
		return "", err
	}
	if !closed(fork, l) {
		return HandledStale, nil // not every child has ended: a later count joins
	}
	children := make([]*saga.State, cur.Children)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, maxJoinReads)
	)
	for k := range cur.Children {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			// A join reads every child: one throttled read among many
			// should not fail it (and, failing again, dead-letter it).
			var child *saga.State
			var err error
			for try := 0; try < joinReadTries; try++ {
				if child, err = c.Get(ctx, durable.ChildID(l.ID, l.Step, l.Seq, k)); !errors.Is(err, durable.ErrThrottled) {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, durable.ErrNotFound):
			case err != nil:
				errs = append(errs, err)
			default:
				children[k] = child
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	j := &saga.Join{Version: cur.Version}
	if fork.Failed < 0 {
		j.Outputs = make([]any, cur.Children)
	}
	for k, child := range children {
		if child == nil {
			if fork.Failed < 0 {
				return "", fmt.Errorf("%w: fork %s closed without child %d", ErrDamagedState, forkKey(l), k)
			}
			continue
		}
		for _, id := range child.Seen {
			// The ids of signals a child took (its callbacks' are its
			// own), as many as a saga remembers.
			if len(j.Seen) < maxJoinSeen && !strings.HasPrefix(id, "cb:") {
				j.Seen = append(j.Seen, id)
			}
		}
		switch {
		case child.Status == durable.StatusSucceeded:
			j.Succeeded = append(j.Succeeded, k)
			if j.Outputs != nil {
				j.Outputs[k] = child.Output
			}
		case child.Status == durable.StatusCompensationFailed:
			j.Parked = append(j.Parked, k)
		case !child.Status.Final():
			return "", fmt.Errorf("%w: fork %s closed while child %d is %s", ErrDamagedState, forkKey(l), k, child.Status)
		}
	}
	if fork.Failed >= 0 && fork.Failed < len(children) && children[fork.Failed] != nil {
		j.Failure = children[fork.Failed].Failure
	}
	switch {
	case fork.Failed >= cur.Children:
		// Stopped from outside (a cancel, the deadline): the parent's own
		// state says why (saga.Plan.Advance takes it from there).
		j.Failure = &saga.StepError{Step: l.Step, Type: lang.ErrorTypeCancelled, Message: "the fork was stopped"}
	case fork.Failed >= 0 && j.Failure == nil:
		j.Failure = &saga.StepError{Step: l.Step, Type: lang.ErrorTypeGeneric, Message: fmt.Sprintf("child %d of %s failed", fork.Failed, l.Step)}
	}
	var h heard
	apply := func(st *saga.State, base uint64, limit int) error {
		if err := plan.Advance(st, saga.Event{Kind: saga.EventJoin, Now: c.cfg.Clock.Now(), Rand: c.cfg.Rand(), Join: j, StoreLimit: limit, OnStep: c.observer(plan, &h, st.SagaID, st, nil)}); err != nil {
			return err
		}
		return c.write(ctx, st, base, &h)
	}
	err = apply(st, rec.Version, 0)
	if unstorable(err) {
		// The outputs (or what follows the fork) take the state past what
		// can be stored: join again measuring, so that the fork fails, its
		// children are undone, and the saga compensates.
		if rec, st, _, err = c.load(ctx, msg.SagaID); err != nil {
			return "", err
		}
		if cur2, ok := st.Pending(); !ok || cur2 != cur {
			return "", fmt.Errorf("saga %s: %w", msg.SagaID, durable.ErrConflict)
		}
		err = apply(st, rec.Version, saga.MaxStateBytes)
	}
	if err != nil {
		return "", err
	}
	if err := c.sendOutbox(ctx, st, plan); err != nil {
		return "", fmt.Errorf("saga %s: version %d written, outbox not sent: %w", st.SagaID, st.Version, err)
	}
	c.logHandled(ctx, msg, st, HandledStep, 0)
	return HandledStep, nil
}

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
	if err := plan.Advance(st, saga.Event{Kind: saga.EventUndo, Now: c.cfg.Clock.Now(), Rand: c.cfg.Rand(), OnStep: c.observer(plan, &h, st.SagaID, st, nil)}); err != nil {
		return "", err
	}
	if err := c.write(ctx, st, rec.Version, &h); err != nil {
		return "", err
	}
	if err := c.sendOutbox(ctx, st, plan); err != nil {
		return "", fmt.Errorf("saga %s: version %d written, outbox not sent: %w", st.SagaID, st.Version, err)
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
	if err := plan.Advance(st, saga.Event{Kind: saga.EventUndone, Now: c.cfg.Clock.Now(), Rand: c.cfg.Rand(), Undone: u, OnStep: c.observer(plan, &h, st.SagaID, st, nil)}); err != nil {
		return "", err
	}
	if err := c.write(ctx, st, rec.Version, &h); err != nil {
		return "", err
	}
	if err := c.sendOutbox(ctx, st, plan); err != nil {
		return "", fmt.Errorf("saga %s: version %d written, outbox not sent: %w", st.SagaID, st.Version, err)
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "child undone", slog.String("saga_id", st.SagaID), slog.String("child", child.SagaID))
	return HandledStep, nil
}

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

// forkWork returns the launches of an outbox.
func forkWork(msgs []durable.Message) []durable.Message {
	var out []durable.Message
	for _, m := range msgs {
		if m.Kind == durable.KindLaunch {
			out = append(out, m)
		}
	}
	return out
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
