package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

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
	children, err := c.readChildren(ctx, l, cur.Children)
	if err != nil {
		return "", err
	}
	j, err := joinOf(l, cur, fork, children)
	if err != nil {
		return "", err
	}
	var h heard
	s := subject{sagaID: st.SagaID, step: msg.Step, plan: plan}
	t := transition{
		advance: func(st *saga.State, limit int) error {
			return plan.Advance(st, saga.Event{Kind: saga.EventJoin, Now: c.cfg.Clock.Now(), Rand: c.cfg.Rand(), Join: j, StoreLimit: limit, OffloadBytes: c.offloadBytes(), OnStep: c.observer(plan, &h, st.SagaID, st, nil)})
		},
		// The outputs (or what follows the fork) take the state past what
		// can be stored: join again measuring, so that the fork fails, its
		// children are undone, and the saga compensates. A keep since
		// leaves the fork pending: the join still applies.
		reread: func(ctx context.Context, _ uint64) (*saga.State, uint64, error) {
			rec, st, _, err := c.load(ctx, msg.SagaID)
			if err != nil {
				return nil, 0, err
			}
			if cur2, ok := st.Pending(); !ok || cur2 != cur {
				return nil, 0, fmt.Errorf("saga %s: %w", msg.SagaID, durable.ErrConflict)
			}
			return st, rec.Version, nil
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

// readChildren reads the children of the fork l, at most maxJoinReads at
// once; a child never created is nil.
func (c *Coordinator) readChildren(ctx context.Context, l *saga.ParentLink, n int) ([]*saga.State, error) {
	children := make([]*saga.State, n)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, maxJoinReads)
	)
	for k := range n {
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
		return nil, err
	}
	return children, nil
}

// joinOf is the join of the fork l, which cur waits on, from its record
// and its children as read.
func joinOf(l *saga.ParentLink, cur saga.Cursor, fork *durable.ForkRecord, children []*saga.State) (*saga.Join, error) {
	j := &saga.Join{Version: cur.Version}
	if fork.Failed < 0 {
		j.Outputs = make([]any, cur.Children)
	}
	for k, child := range children {
		if child == nil {
			if fork.Failed < 0 {
				return nil, fmt.Errorf("%w: fork %s closed without child %d", ErrDamagedState, forkKey(l), k)
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
			return nil, fmt.Errorf("%w: fork %s closed while child %d is %s", ErrDamagedState, forkKey(l), k, child.Status)
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
	return j, nil
}
