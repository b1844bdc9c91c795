package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A finished tree expires with its root (docs/PROTOCOL.md, "What
// expires"). A root saga that forked and ends succeeded or compensated
// sends a KindExpire message of its own (saga.Advance puts it in the
// final transition's outbox). Its handler walks the root's fork visits
// (saga.State.Forks): it marks each child (Store.SagaExpire) and each
// fork record (Store.ForkExpire) to expire on the root's schedule, and
// sends a KindExpire of each child that forked in turn, whose handler
// walks that child's visits the same way. A walk longer than
// CoordinatorConfig.ExpireBatch goes on in a message of its own, which
// names the visit (Attempt-1) and the child (Child) it resumes from. Every
// mark is idempotent and creates nothing, so a crash anywhere in a walk
// loses nothing: the message comes back and marks again.
//
// With an object store that can (durable.ObjectsEnder), the objects of
// each saga of the tree are marked ended as its item is, so that they
// expire with the retention: the root's by the first message of its walk,
// before any other mark, and each child's after its item's mark. A root
// that kept values as objects sends a KindExpire even when it never
// forked (saga.State.Objects); its walk is then the root's objects alone.
// The expiry reads states without their values: no object is read.

// defaultExpireBatch is CoordinatorConfig.ExpireBatch's default.
const defaultExpireBatch = 1000

// maxTreeDepth bounds the climb from a child to its root: far past the
// deepest tree a definition can make (lang.MaxForkDepth).
const maxTreeDepth = 16

// maxExpireWrites bounds the marks of one walk in flight.
const maxExpireWrites = 16

// expireResumeDelay is how long the rest of a walk whose mark failed
// waits (a throttled table, say) before it goes on.
const expireResumeDelay = 10 * time.Second

// expire handles KindExpire: it marks one batch of the tree below the
// saga the message names.
func (c *Coordinator) expire(ctx context.Context, msg durable.Message) (Outcome, error) {
	_, st, plan, err := c.loadAs(ctx, msg.SagaID, false)
	ctx = c.traceMessage(ctx, st) // in the saga's own trace, as its other messages
	if errors.Is(err, errSagaMissing) {
		return "", fmt.Errorf("%w: %w", durable.ErrMalformedMessage, err)
	}
	if err != nil {
		return "", err
	}
	if st.Version != msg.Version || !st.Status.Final() {
		return HandledStale, nil // a saga that ended never moves: not ours
	}
	endedAt, ok, err := c.rootEnded(ctx, st)
	if err != nil {
		return "", err
	}
	if !ok {
		return HandledStale, nil // the root is kept (parked): so is its tree
	}
	visit, from := msg.Attempt-1, msg.Child
	if len(st.Forks) == 0 && (visit != 0 || from != 0) || len(st.Forks) > 0 && (visit >= len(st.Forks) || from < 0 || from > st.Forks[visit].Children) {
		return "", fmt.Errorf("%w: expire of saga %s from visit %d child %d, which it has not", durable.ErrMalformedMessage, st.SagaID, visit, from)
	}
	if st.Parent == nil && visit == 0 && from == 0 {
		// The walk's first message: the root's own objects, before any
		// other mark, so that a failure fails the delivery and the
		// message comes back to mark them again.
		if err := c.endObjects(ctx, st.SagaID); err != nil {
			return "", err
		}
	}
	var out []durable.Message
	next := func(visit, from int) durable.Message {
		// The batch is spent: the walk goes on from here in a message of
		// its own.
		return durable.Message{SagaID: st.SagaID, Version: st.Version, Queue: durable.QueueAdvance, Kind: durable.KindExpire, Step: plan.StepID(st.Forks[visit].Step), Attempt: visit + 1, Child: from}
	}
	// A mark that fails after others of this delivery landed does not
	// start the walk over: the rest goes on, after a pause, in a message
	// of its own, and this delivery succeeds. One that fails before any
	// landed fails the delivery (the message comes back, and a walk that
	// never gets on reaches the dead-letter queue).
	progressed := false
	failed := func(visit, from int, err error) error {
		if !progressed {
			return err
		}
		m := next(visit, from)
		m.Delay = expireResumeDelay
		out = append(out, m)
		c.log.LogAttrs(ctx, slog.LevelWarn, "expire walk goes on later", slog.String("saga_id", st.SagaID),
			slog.Int("visit", visit), slog.Int("child", from), slog.String("error", err.Error()))
		return nil
	}
walk:
	for budget := c.cfg.ExpireBatch; visit < len(st.Forks); visit, from = visit+1, 0 {
		if budget <= 0 {
			out = append(out, next(visit, from))
			break
		}
		f := st.Forks[visit]
		key := durable.ForkKey(st.SagaID, plan.StepID(f.Step), f.Seq)
		launched, err := c.launchedChildren(ctx, key, f)
		if err != nil {
			if err := failed(visit, from, err); err != nil {
				return "", err
			}
			break
		}
		var ks []int
		k := from
		for ; k < f.Children && len(ks) < budget; k++ {
			if launched(k) {
				ks = append(ks, k)
			}
		}
		deeper, done, err := c.expireChildren(ctx, st, plan, f, ks, endedAt)
		out = append(out, deeper...)
		progressed = progressed || done > 0
		if err != nil {
			if err := failed(visit, ks[done], err); err != nil {
				return "", err
			}
			break walk
		}
		budget -= len(ks)
		if k < f.Children {
			out = append(out, next(visit, k))
			break
		}
		// Every child of the visit is marked: then its record.
		err = c.cfg.Store.ForkExpire(ctx, &durable.ForkExpireParams{Key: key, EndedAt: endedAt})
		if err != nil && !errors.Is(err, durable.ErrNotFound) {
			if err := failed(visit, f.Children, err); err != nil {
				return "", err
			}
			break
		}
		progressed = true
		budget--
	}
	if err := c.send(ctx, out); err != nil {
		return "", fmt.Errorf("saga %s: expire: %w", st.SagaID, err)
	}
	c.logHandled(ctx, msg, st, HandledExpired, 0)
	return HandledExpired, nil
}

// launchedChildren reads visit f's fork record and reports which of its
// children may exist: lane j's children j, j+C, j+2C, ... start one after
// the other, each licensed by the count of the one before, so past the
// lane's count plus one none was created (a fork that failed early
// launched few of its children). Without a record, or a visit that does
// not say its lanes, every child may.
func (c *Coordinator) launchedChildren(ctx context.Context, key string, f saga.ForkVisit) (func(k int) bool, error) {
	all := func(int) bool { return true }
	if f.Lanes < 1 {
		return all, nil
	}
	rec, err := c.cfg.Store.ForkGet(ctx, &durable.ForkGetParams{Key: key})
	if errors.Is(err, durable.ErrNotFound) {
		return all, nil
	}
	if err != nil {
		return nil, err
	}
	return func(k int) bool { return k/f.Lanes <= rec.Count(k%f.Lanes) }, nil
}

// expireChildren marks children ks of fork visit f of st. Of a
// fork whose children may fork in turn, each child is read, and those
// that did fork get a KindExpire of their own, which it returns. A child
// that does not exist (its fork failed before it was launched) is passed
// over. The marks go in windows of maxExpireWrites at once, in order,
// and stop after a window where one failed: done is how many of ks, from
// the first, were all marked (the messages returned are theirs), and on
// an error the walk goes on from ks[done], marking again at most a window
// of those after it.
func (c *Coordinator) expireChildren(ctx context.Context, st *saga.State, plan *saga.Plan, f saga.ForkVisit, ks []int, endedAt time.Time) (out []durable.Message, done int, err error) {
	step, deep := plan.StepID(f.Step), plan.ChildrenFork(f.Step)
	msgs := make([]*durable.Message, maxExpireWrites)
	errs := make([]error, maxExpireWrites)
	for len(ks) > 0 {
		window := ks[:min(len(ks), maxExpireWrites)]
		var wg sync.WaitGroup
		for i, k := range window {
			wg.Go(func() {
				msgs[i], errs[i] = c.expireChild(ctx, durable.ChildID(st.SagaID, step, f.Seq, k), deep, endedAt)
			})
		}
		wg.Wait()
		for i := range window {
			if errs[i] != nil {
				return out, done, errors.Join(errs[:len(window)]...)
			}
			if msgs[i] != nil {
				out = append(out, *msgs[i])
			}
			done++
		}
		ks = ks[len(window):]
	}
	return out, done, nil
}

// expireChild marks one child, and returns the KindExpire of its own
// tree when it forked.
func (c *Coordinator) expireChild(ctx context.Context, id string, deep bool, endedAt time.Time) (*durable.Message, error) {
	var err error
	for try := 0; try < joinReadTries; try++ {
		if err = c.cfg.Store.SagaExpire(ctx, &durable.SagaExpireParams{SagaID: id, EndedAt: endedAt}); !errors.Is(err, durable.ErrThrottled) {
			break
		}
	}
	if err != nil {
		return nil, ignoreNotFound(err)
	}
	_, ended := c.objectsEnder()
	if !deep && !ended {
		return nil, nil
	}
	_, child, _, err := c.loadAs(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if child.Objects {
		// Marked after its item: a failure here marks the item again
		// when the walk resumes from this child, which is harmless.
		if err := c.endObjects(ctx, id); err != nil {
			return nil, err
		}
	}
	if !deep || len(child.Forks) == 0 {
		return nil, nil
	}
	return &durable.Message{SagaID: id, Version: child.Version, Queue: durable.QueueAdvance, Kind: durable.KindExpire, Attempt: 1}, nil
}

// objectsEnder returns the object store's ObjectsEnder, if it has one.
func (c *Coordinator) objectsEnder() (durable.ObjectsEnder, bool) {
	e, ok := c.cfg.Objects.(durable.ObjectsEnder)
	return e, ok
}

// endObjects marks saga id's objects ended (durable.ObjectsEnder), with
// the store's throttling retried as a mark's is; nothing without an
// object store that can.
func (c *Coordinator) endObjects(ctx context.Context, id string) error {
	e, ok := c.objectsEnder()
	if !ok {
		return nil
	}
	var err error
	for try := 0; try < joinReadTries; try++ {
		if err = e.ObjectsEnd(ctx, &durable.ObjectsEndParams{SagaID: id}); !errors.Is(err, durable.ErrThrottled) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("saga %s: end its objects: %w", id, err)
	}
	return nil
}

func ignoreNotFound(err error) error {
	if errors.Is(err, durable.ErrNotFound) {
		return nil
	}
	return err
}

// rootEnded climbs from st to the root of its tree and returns when the
// root ended, and false when the root is not over for good (parked in
// compensation_failed, or not final), so that its tree is kept.
func (c *Coordinator) rootEnded(ctx context.Context, st *saga.State) (time.Time, bool, error) {
	for depth := 0; st.Parent != nil; depth++ {
		if depth > maxTreeDepth {
			return time.Time{}, false, fmt.Errorf("%w: saga %s is deeper than any tree", ErrDamagedState, st.SagaID)
		}
		_, parent, _, err := c.loadAs(ctx, st.Parent.ID, false)
		if err != nil {
			return time.Time{}, false, err
		}
		st = parent
	}
	if st.Status != durable.StatusSucceeded && st.Status != durable.StatusCompensated {
		return time.Time{}, false, nil
	}
	return st.UpdatedAt, true, nil
}
