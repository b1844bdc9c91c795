package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// SignalParams sends a signal to a saga.
type SignalParams struct {
	SagaID string // the saga to signal
	Name   string // the signal's name, as an await names it
	// Payload is any JSON-able value (json.RawMessage for JSON text), of
	// at most lang.MaxSignalBytes as JSON; the await's out receives it.
	Payload any
	// ID makes the signal idempotent: a signal of the same id sent again
	// (a retry after a timeout, say) is taken once. Empty: a random id.
	ID string
}

// Delivered says what became of a signal or a callback's completion.
type Delivered struct {
	Receipt saga.Receipt // applied, kept, or duplicate
	// State is the run that took it, after it: the saga, or the run of
	// its tree a signal went to (a branch, an iteration, a child saga;
	// State.SagaID names it).
	State *saga.State
}

// Signal sends a signal to a saga's tree: the saga, and the runs of its
// forks (branches, iterations, child sagas) at any depth. The run that
// awaits it now goes on at once, its payload in the await's out; when
// several do, the signal is refused naming them (send it to one). When
// none does yet, the run that may take it keeps it (at most
// lang.MaxKeptSignals): the saga itself if one of its own awaits takes
// it, else the first running child whose run may; a signal only a fork's
// children take, sent before they start, is kept by the saga and given
// to the first child that may take it as it starts. A signal no await of
// the tree takes is refused, as a saga that is compensating or final is
// (saga.ErrNotReceiving), or unknown (durable.ErrNotFound), or keeps too
// many (saga.ErrKeptFull). A signal racing the await's timeout or a
// cancel is decided by which write lands first: the loser is told, never
// applied twice.
func (c *Coordinator) Signal(ctx context.Context, p *SignalParams) (*Delivered, error) {
	if err := checkSagaID(p.SagaID); err != nil {
		return nil, err
	}
	id := p.ID
	if id == "" {
		id = "sig-" + randomID()
	}
	d := saga.Delivery{Signal: p.Name, ID: id}
	return c.deliver(ctx, p.SagaID, d, p.Payload, "signal "+p.Name, true)
}

// CompleteCallback completes a callback token with the step's output: the
// step goes on, as if its action had returned output. A token the saga
// did not issue is saga.ErrBadToken; one of an attempt the saga no longer
// waits on (an earlier visit or attempt, timed out) is
// saga.ErrTokenNotAwaited; a saga compensating or final refuses it
// (saga.ErrNotReceiving). Completing a token twice applies it once: the
// second is a duplicate. A completion that comes while the action that got
// the token still runs is kept, and taken when the action returns.
func (c *Coordinator) CompleteCallback(ctx context.Context, token string, output any) (*Delivered, error) {
	ref, err := saga.ParseCallbackToken(token)
	if err != nil {
		return nil, err
	}
	return c.deliver(ctx, ref.SagaID, saga.Delivery{Token: token}, output, "callback", false)
}

// FailCallback fails a callback token's attempt with an error type (that
// retry.permanent and catch match) and a message: the step retries with a
// new attempt, and a new token, or fails.
func (c *Coordinator) FailCallback(ctx context.Context, token, errorType, message string) (*Delivered, error) {
	ref, err := saga.ParseCallbackToken(token)
	if err != nil {
		return nil, err
	}
	if errorType == "" {
		return nil, fmt.Errorf("%w: a failed callback needs an error type", saga.ErrBadDelivery)
	}
	return c.deliver(ctx, ref.SagaID, saga.Delivery{Token: token, Err: &saga.StepError{Type: errorType, Message: message}}, nil, "callback", false)
}

// deliver gives a saga d, with payload: one conditional write, a
// transition or a keep, retried on conflict. With route, a signal goes to
// the run of the saga's tree that takes it (route).
func (c *Coordinator) deliver(ctx context.Context, sagaID string, d saga.Delivery, payload any, what string, route bool) (*Delivered, error) {
	v, size, err := plainJSON(payload)
	if err != nil {
		return nil, fmt.Errorf("%s to saga %s: %w: payload: %w", what, sagaID, saga.ErrBadDelivery, err)
	}
	d.Payload = v
	if err := saga.CheckDeliveryWithin(&d, size, c.offloadBytes()); err != nil {
		return nil, fmt.Errorf("%s to saga %s: %w", what, sagaID, err)
	}
	for range c.cfg.MaxConflictRetries {
		rec, st, plan, err := c.load(ctx, sagaID)
		if err != nil {
			return nil, err
		}
		if route && d.Signal != "" {
			target, keepFor, err := c.route(ctx, st, plan, d.Signal, d.ID)
			if err != nil {
				return nil, fmt.Errorf("%s to saga %s: %w", what, sagaID, err)
			}
			if target != "" {
				// A child whose own fork has a child yet to start for it
				// routes it on (keepFor -2); any other takes it.
				return c.deliver(ctx, target, d, payload, what, keepFor == routeOn)
			}
			d.Child = keepFor + 1 // 0: none named, the count decides
		}
		var h heard
		ev := saga.Event{Now: c.cfg.Clock.Now(), Rand: c.cfg.Rand(), Delivery: d, OffloadBytes: c.offloadBytes(), OnStep: c.observer(plan, &h, sagaID, st, nil)}
		receipt, err := plan.Receive(st, &ev)
		if err != nil {
			return nil, err
		}
		switch receipt {
		case saga.ReceiptDuplicate:
			if err := c.resendDuplicate(ctx, st, plan); err != nil {
				return nil, fmt.Errorf("%s to saga %s: re-send: %w", what, sagaID, err)
			}
			return &Delivered{Receipt: receipt, State: st}, nil
		case saga.ReceiptKept:
			err = c.writeKept(ctx, st, rec.Version, &h)
		default:
			s := subject{sagaID: sagaID, plan: plan}
			t := transition{
				// What follows the await grew the state past what can be
				// stored: apply it again measuring, so that the step that
				// grew it fails in a state that can be.
				advance: func(st *saga.State, limit int) error {
					ev = saga.Event{Now: ev.Now, Rand: ev.Rand, Delivery: d, StoreLimit: limit, OffloadBytes: c.offloadBytes(), OnStep: c.observer(plan, &h, sagaID, st, nil)}
					var rerr error
					receipt, rerr = plan.Receive(st, &ev)
					return rerr
				},
				write: func(ctx context.Context, st *saga.State, base uint64) error {
					if receipt == saga.ReceiptKept {
						return c.writeKept(ctx, st, base, &h)
					}
					return c.write(ctx, st, base, &h)
				},
				// Received again on the saga as it is now, whatever its
				// version: a delivery is not tied to one.
				reread: func(ctx context.Context, _ uint64) (*saga.State, uint64, error) {
					rec, st, _, err := c.load(ctx, sagaID)
					if err != nil {
						return nil, 0, err
					}
					return st, rec.Version, nil
				},
			}
			st, err = c.settle(ctx, &s, &t, &h, st, rec.Version, t.write(ctx, st, rec.Version))
		}
		if errors.Is(err, durable.ErrConflict) {
			continue
		}
		if errors.Is(err, durable.ErrTooLarge) && receipt == saga.ReceiptKept {
			return nil, fmt.Errorf("%s to saga %s: %w: the saga's state has no room to keep it", what, sagaID, saga.ErrKeptFull)
		}
		if err != nil {
			return nil, err
		}
		if receipt == saga.ReceiptApplied {
			// A keep sends nothing: the messages in flight carry on.
			if err := c.publish(ctx, st, plan); err != nil {
				return nil, fmt.Errorf("%s: %w (send it again, with the same id, or the sweep sends it)", what, err)
			}
		}
		c.log.LogAttrs(ctx, slog.LevelInfo, "delivered", slog.String("saga_id", sagaID), slog.String("what", what),
			slog.String("receipt", string(receipt)), slog.Uint64("version", st.Version), slog.String("status", string(st.Status)))
		if receipt == saga.ReceiptKept && d.Child > 0 {
			// Kept for a child that had yet to start: if it was being
			// created meanwhile, its launcher may have read the saga
			// before this keep (engine launch, handLateKept).
			if got, err := c.giveToCreatedChild(ctx, st, plan, d, payload, what); got != nil || err != nil {
				return got, err
			}
		}
		return &Delivered{Receipt: receipt, State: st}, nil
	}
	return nil, fmt.Errorf("%s to saga %s: %w after %d tries", what, sagaID, durable.ErrConflict, c.cfg.MaxConflictRetries)
}

// giveToCreatedChild gives d, just kept by st for the child it names, to
// that child if it exists by now; nil when it does not.
func (c *Coordinator) giveToCreatedChild(ctx context.Context, st *saga.State, plan *saga.Plan, d saga.Delivery, payload any, what string) (*Delivered, error) {
	cur, ok := st.Pending()
	if !ok || !cur.Fork {
		return nil, nil
	}
	id := durable.ChildID(st.SagaID, plan.StepID(cur.Step), cur.Seq, d.Child-1)
	if _, _, _, err := c.load(ctx, id); errors.Is(err, errSagaMissing) {
		return nil, nil // its launcher reads the saga after creating it
	} else if err != nil {
		return nil, fmt.Errorf("%s to saga %s: kept for child %s, which could not be read: %w", what, st.SagaID, id, err)
	}
	d.Child = 0
	got, err := c.deliver(ctx, id, d, payload, what, false)
	if errors.Is(err, saga.ErrNotReceiving) {
		return nil, nil // it has passed its awaits or ended: the saga keeps it
	}
	if err == nil && got.Receipt == saga.ReceiptDuplicate {
		// Its launcher read the saga after this keep and handed it over:
		// what this send did is the keep.
		return nil, nil
	}
	return got, err
}

// delayed copies msgs, each delayed by durable.MaxDelay at least but a
// fork's stop (idempotent, it runs no action beside anyone).
func delayed(msgs []durable.Message) []durable.Message {
	out := make([]durable.Message, len(msgs))
	for i, m := range msgs {
		if m.Kind != durable.KindStop { // runs no action: at once
			m.Delay = max(m.Delay, durable.MaxDelay)
		}
		out[i] = m
	}
	return out
}

// plainJSON makes payload plain values through JSON, and measures it.
func plainJSON(payload any) (any, int, error) {
	if payload == nil {
		return nil, 0, nil
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, 0, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, 0, err
	}
	v, err = saga.NormalizeJSON(v)
	return v, len(raw), err
}

// writeKept stores a saga that kept a delivery: the same version, one more
// kept, conditional on both as read.
func (c *Coordinator) writeKept(ctx context.Context, st *saga.State, version uint64, h *heard) error {
	rec, err := c.record(ctx, st, nil)
	if err != nil {
		return err
	}
	c.writing(st.SagaID)
	err = c.cfg.Store.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: rec, ExpectedVersion: version, ExpectedReceived: st.Received - 1})
	if mayBeWritten(err) {
		h.report()
	}
	c.heardAll(st.SagaID)
	return err
}

// route returns the run of st's tree that the signal name goes to, or ""
// for st itself: a run that awaits it now (an error when several do), else
// st if one of its own awaits takes it later, else the first running
// child whose run may. Only the fork st waits on is read, and in it only
// the children current in each lane, and only where an await of the
// signal is in their plans; a saga with no fork, or awaiting the signal
// itself, costs no read.
//
// When st keeps it for a child of its fork that has yet to start, keepFor
// is that child's index (saga.Plan.KeepFor); -1 otherwise.
func (c *Coordinator) route(ctx context.Context, st *saga.State, plan *saga.Plan, name, id string) (target string, keepFor int, err error) {
	r := plan.RouteSignal(st, name)
	if r.AwaitsNow || !r.InFork || st.CancelRequested || slices.Contains(st.Seen, id) {
		return "", -1, nil
	}
	w := walk{name: name, id: id, reads: maxRouteReads, missing: map[int]bool{}}
	if err := c.walkRuns(ctx, st, plan, 1, &w); err != nil {
		return "", -1, err
	}
	now, later := w.now, w.later
	switch {
	case w.took != "":
		return w.took, -1, nil // a repeat of a signal a run took: that run answers duplicate
	case len(now) == 1:
		return now[0], -1, nil
	case len(now) > 1:
		return "", -1, fmt.Errorf("%w: %d runs of saga %s await signal %s now (%s): send it to one of them", saga.ErrNotReceiving, len(now), st.SagaID, name, strings.Join(now, ", "))
	case r.Later:
		return "", -1, nil
	case len(later) > 0:
		return later[0], -1, nil
	case !w.future && w.reads > 0:
		// Every child of the fork has started, none of them can take
		// it any more, nor can the saga: kept, it would be dropped at
		// the join.
		return "", -1, fmt.Errorf("%w: no run of saga %s can take signal %s any more: the runs that await it have passed their awaits or ended", saga.ErrNotReceiving, st.SagaID, name)
	}
	// Kept, and given to a child of the fork that has yet to start: the
	// first that may take it, past those started (a lane's children
	// before its current one; its current one unless it was read and is
	// not created yet).
	started := func(k int) bool {
		if w.lanes == 0 {
			return true // the fork was not read
		}
		cur, ok := w.current[k%w.lanes]
		if !ok {
			return true // a lane with no child left, or stopped
		}
		return k < cur || k == cur && !w.missing[k]
	}
	if k := plan.KeepFor(st, name, started); k >= 0 || w.futureIn == "" {
		return "", k, nil
	}
	// No child of this fork that has yet to start may take it, but one
	// in a running child's own fork may: that child routes it on.
	return w.futureIn, routeOn, nil
}

// routeOn is route's keepFor for a target that routes the signal on
// through its own fork.
const routeOn = -2

// maxRouteReads bounds the reads one signal's routing makes (fork records
// and child runs): a tree of nested forks holds lanes^depth runs, and
// whoever may send a signal would otherwise have them all read. With the
// reads sending a signal costs besides (the saga's, and the run's that
// takes it), one signal reads at most lang.MaxConcurrency+1 items.
const maxRouteReads = lang.MaxConcurrency - 1

// walkRuns adds to now the runs among the children of the fork st waits on
// (and theirs, down to lang.MaxForkDepth) that await the signal name now,
// and to later those whose own awaits may take it later, in index order,
// depth first, until reads (fork records and runs) are spent: a tree
// larger than that is routed on what was read, the first runs of each
// fork.
func (c *Coordinator) walkRuns(ctx context.Context, st *saga.State, plan *saga.Plan, depth int, w *walk) error {
	if w.reads <= 0 || w.took != "" {
		return nil
	}
	w.reads--
	lanes, err := c.currentChildren(ctx, st, plan)
	if err != nil {
		return err
	}
	if depth == 1 {
		w.current = map[int]int{}
		for _, lane := range lanes {
			w.current[lane.index%lane.lanes] = lane.index
			w.lanes = lane.lanes
		}
	}
	for _, lane := range lanes {
		if w.reads <= 0 || w.took != "" {
			return nil
		}
		if lane.more {
			w.future = true // a child of this lane has yet to start
		}
		id := lane.id
		w.reads--
		_, ch, chPlan, err := c.load(ctx, id)
		if errors.Is(err, errSagaMissing) {
			w.future = true // licensed, not created yet: it is given the signal as it starts
			if depth == 1 {
				w.missing[lane.index] = true
			}
			continue
		}
		if err != nil {
			return err
		}
		if w.id != "" && slices.Contains(ch.Seen, w.id) {
			w.took = id // it took this signal already, ended or not
			return nil
		}
		if (ch.Status != durable.StatusRunning && ch.Status != durable.StatusWaiting) || ch.CancelRequested {
			continue
		}
		r := chPlan.RouteSignal(ch, w.name)
		switch {
		case r.AwaitsNow:
			w.now = append(w.now, id)
		case r.Later:
			w.later = append(w.later, id)
		}
		if r.InFork && depth < lang.MaxForkDepth {
			before := w.future
			w.future = false
			if err := c.walkRuns(ctx, ch, chPlan, depth+1, w); err != nil {
				return err
			}
			if depth == 1 && w.future && w.futureIn == "" {
				w.futureIn = id // a child of its fork, at any depth, has yet to start
			}
			w.future = w.future || before
		}
	}
	return nil
}

// walk is what routing a signal through a tree gathers.
type walk struct {
	name, id   string   // the signal, and its delivery id
	reads      int      // reads left
	now, later []string // runs that await it now, and that may later
	took       string   // a run that took this very delivery already
	future     bool     // a child of a fork read has yet to start
	// Of the fork the saga waits on: its lanes, each lane's current child
	// by lane, and those current children read and not created yet.
	lanes   int
	current map[int]int
	missing map[int]bool
	// futureIn is the first child of that fork under which a child of a
	// fork of its own, at any depth, has yet to start.
	futureIn string
}

// laneChild is the current child of a fork's lane: launched or licensed,
// its end not yet counted.
type laneChild struct {
	id           string
	index, lanes int  // the child's index in the fork, and the fork's lanes
	more         bool // the lane starts another child after this one
}

// currentChildren lists the current child of each lane of the fork st
// waits on, by index.
func (c *Coordinator) currentChildren(ctx context.Context, st *saga.State, plan *saga.Plan) ([]laneChild, error) {
	l, rec, err := c.forkOf(ctx, st, plan)
	if err != nil {
		return nil, err
	}
	var lanes []laneChild
	for j := range l.Lanes {
		if k := j + rec.Count(j)*l.Lanes; k < l.Children && !rec.IsStopped(j) {
			lanes = append(lanes, laneChild{id: durable.ChildID(l.ID, l.Step, l.Seq, k), index: k, lanes: l.Lanes, more: k+l.Lanes < l.Children})
		}
	}
	return lanes, nil
}

// resendDuplicate answers a delivery st has taken before: a retry of one
// whose write landed and whose send may not have. The stored outbox goes
// again, as a fallback delayed as long as a queue allows, so that it
// never runs an attempt beside a worker running it now (the copy finds a
// later version by then, and is dropped, unless the first send was
// lost). Launches are idempotent, and nothing runs them if they were
// lost: they are done now.
func (c *Coordinator) resendDuplicate(ctx context.Context, st *saga.State, plan *saga.Plan) error {
	if err := c.send(ctx, delayed(st.Outbox)); err != nil {
		return err
	}
	if !hasForkWork(st.Outbox) {
		return nil
	}
	work := *st // a shallow copy, read only
	work.Outbox = forkWork(st.Outbox)
	return c.resendOutbox(ctx, &work, plan)
}
