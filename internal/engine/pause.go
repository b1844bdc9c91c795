package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Pauses (docs/PROTOCOL.md, "Pauses"): an operator pauses the steps of a
// saga name or the calls of an action (sagactl pause). A worker about to
// run a paused attempt sends its message again with a delay and writes
// nothing (HandledPaused); a chain stops before a paused step.

// HandledPaused is the outcome of a message whose attempt is paused: sent
// again with a delay, nothing written, no attempt spent.
const HandledPaused Outcome = "paused"

const (
	// PauseTTL is how long a worker trusts the pauses it read: each
	// process reads the store's pauses at most once per PauseTTL (one
	// GetItem in store/dynamo), so a paused deployment costs no read per
	// step, and a pause or an unpause takes effect within it (plus the
	// store's own delay, an eventually consistent read). Pauses made
	// through this process's Coordinator take effect at once.
	PauseTTL = 5 * time.Second
	// PausePoll is how long a paused attempt's message waits before it
	// looks again: an unpause runs the step at most this long after it
	// (plus PauseTTL). Each look costs a paused saga one send, receive
	// and delete (bench/README.md, "Pauses"): 60 an hour. A pause with an
	// end (Until) and a saga's deadline shorten the wait, so the step runs
	// when the pause ends, or the deadline fires on time.
	PausePoll = time.Minute
)

// pauseCache is the pauses as this process last read them.
type pauseCache struct {
	store durable.Pauses // nil: the store keeps none, nothing is ever paused
	snap  atomic.Pointer[pauseSnapshot]
	mu    sync.Mutex // one read of the store at a time
}

// pauseSnapshot is one read of the pauses, indexed for a lookup per step
// that allocates nothing.
type pauseSnapshot struct {
	until    time.Time // read again from then on
	byName   map[string]durable.Pause
	byAction map[string]durable.Pause
}

func newPauseCache(store durable.Store) *pauseCache {
	ps, _ := store.(durable.Pauses)
	return &pauseCache{store: ps}
}

// current returns the pauses to judge by at now, reading the store when
// the last read is PauseTTL old. A failed read keeps the pauses read
// before (none, on a first read), logged, and is tried again after
// PauseTTL: a worker that cannot read the pauses goes on running steps
// rather than stopping every saga.
func (c *Coordinator) currentPauses(ctx context.Context, now time.Time) *pauseSnapshot {
	pc := c.pauses
	if pc.store == nil {
		return nil
	}
	if s := pc.snap.Load(); s != nil && now.Before(s.until) {
		return s
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if s := pc.snap.Load(); s != nil && now.Before(s.until) {
		return s // read by another goroutine meanwhile
	}
	list, err := pc.store.PauseList(ctx, &durable.PauseListParams{})
	if err != nil {
		old := pc.snap.Load()
		c.log.LogAttrs(ctx, slog.LevelWarn, "pauses not read; the ones read before hold", slog.String("error", err.Error()))
		s := &pauseSnapshot{until: now.Add(PauseTTL)}
		if old != nil {
			s.byName, s.byAction = old.byName, old.byAction
		}
		pc.snap.Store(s)
		return s
	}
	s := &pauseSnapshot{until: now.Add(PauseTTL)}
	s.byName, s.byAction = indexPauses(list, now)
	pc.snap.Store(s)
	return s
}

// indexPauses keeps the pauses of list active at now, by saga name and by
// action (nil maps when there are none). An expired pause is left in the
// store (sagactl unpause removes it) and ignored here.
func indexPauses(list []durable.Pause, now time.Time) (byName, byAction map[string]durable.Pause) {
	for _, p := range list {
		if !p.Active(now) {
			continue
		}
		switch p.Kind {
		case durable.PauseName:
			if byName == nil {
				byName = map[string]durable.Pause{}
			}
			byName[p.Target] = p
		case durable.PauseAction:
			if byAction == nil {
				byAction = map[string]durable.Pause{}
			}
			byAction[p.Target] = p
		}
	}
	return byName, byAction
}

// forget makes the next lookup read the store: after a pause or an
// unpause made through this process. The pauses known stay for a read
// that fails.
func (pc *pauseCache) forget() {
	if old := pc.snap.Load(); old != nil {
		pc.snap.Store(&pauseSnapshot{byName: old.byName, byAction: old.byAction})
	}
}

// ListingPauses are the pauses active at one time as a listing of sagas
// shows them (sagactl list, the console's list page): a listing knows each
// saga's name and status, not its next step, so it can tell which sagas a
// pause of their name holds, and only name the actions paused.
type ListingPauses struct {
	byName map[string]durable.Pause
	// Actions are the action pauses active, by action.
	Actions []durable.Pause
}

// ReadListingPauses reads the pauses (read: one item, as the Pauses of a
// coordinator or a client) for a listing of sagas, and keeps those active
// at now. A listing with no saga a pause can hold reads nothing: the zero
// ListingPauses.
func ReadListingPauses(ctx context.Context, read func(context.Context) ([]durable.Pause, error), sagas []durable.SagaSummary, now time.Time) (ListingPauses, error) {
	var lp ListingPauses
	if !slices.ContainsFunc(sagas, func(s durable.SagaSummary) bool { return Pausable(s.Status) }) {
		return lp, nil
	}
	list, err := read(ctx)
	if err != nil {
		return lp, fmt.Errorf("reading the pauses: %w", err)
	}
	var byAction map[string]durable.Pause
	lp.byName, byAction = indexPauses(list, now)
	for _, a := range slices.Sorted(maps.Keys(byAction)) {
		lp.Actions = append(lp.Actions, byAction[a])
	}
	return lp, nil
}

// Holds returns the pause of s's name that holds its next step, by the
// rule pausedBy keeps: a running, waiting or held saga (a held saga's
// retry waits for the unpause), a compensating one only under a pause
// that holds compensations; a final saga has no step to hold. A listing
// sees statuses, not cursors: a running saga undoing a failed fork (its
// catch takes the failure) is marked, though only a pause that holds
// compensations holds that undo.
func (lp ListingPauses) Holds(s durable.SagaSummary) (durable.Pause, bool) {
	p, ok := lp.byName[s.Name]
	if !ok || !Pausable(s.Status) || s.Status == durable.StatusCompensating && !p.Compensations {
		return durable.Pause{}, false
	}
	return p, true
}

// Pausable reports whether a saga in status s has a step to come that a
// pause can hold: running, waiting, held (its retry) or compensating.
func Pausable(s durable.Status) bool {
	return s == durable.StatusRunning || s == durable.StatusWaiting || s == durable.StatusHeld || s == durable.StatusCompensating
}

// pausedBy returns the pause that holds the attempt cur of a saga of
// plan at now, if one does. A pause holds a compensation only if it says
// so (Pause.Compensations). It reads the store at most once per PauseTTL
// and otherwise allocates nothing.
func (c *Coordinator) pausedBy(ctx context.Context, plan *saga.Plan, cur saga.Cursor, now time.Time) (durable.Pause, bool) {
	s := c.currentPauses(ctx, now)
	if s == nil || s.byName == nil && s.byAction == nil {
		return durable.Pause{}, false
	}
	if p, ok := s.byName[plan.Name()]; ok && p.Active(now) && (!cur.Compensating || p.Compensations) {
		return p, true
	}
	if a := plan.CallsAction(cur); a != "" {
		// Finding out an unknown outcome calls the paused action itself:
		// held like a forward attempt.
		if p, ok := s.byAction[a]; ok && p.Active(now) && (!cur.Compensating || cur.Unknown || p.Compensations) {
			return p, true
		}
	}
	return durable.Pause{}, false
}

// paused handles a message whose attempt p holds: it is deferred
// (deferStep) for PausePoll, or until p ends or the saga's deadline if
// sooner. Two things go on through a pause: a saga past its deadline
// fires it, and a cancel that waits for this attempt's outcome gets one,
// so that neither waits for the unpause to start compensating. The
// attempt did not run here, but a delivery before the pause may have run
// it and died before writing its outcome: its outcome is unknown, and the
// saga's compensation finds it out first (under an action pause, that
// call waits for the unpause), never takes it as not done.
func (c *Coordinator) paused(ctx context.Context, msg durable.Message, st *saga.State, plan *saga.Plan, cur saga.Cursor, p durable.Pause, carrier uint64) (Outcome, error) {
	now := c.cfg.Clock.Now()
	if !cur.Compensating && !st.Deadline.IsZero() && !now.Before(st.Deadline) && !st.CancelRequested {
		return c.commitEvent(ctx, msg, st, plan, saga.Event{Kind: saga.EventTimer, Now: now.UTC(), Deferred: true}, HandledTimer)
	}
	if !cur.Compensating && st.CancelRequested {
		// Not run here; a delivery before the pause may have run it (a
		// worker that died before writing): a Timeout, so that the step
		// goes on the stack unknown and is found out as the saga
		// compensates, never taken as not done.
		why := saga.Permanent(&saga.ActionError{Type: lang.ErrorTypeTimeout, Message: fmt.Sprintf("not run: the saga was cancelled while its %s %s %s", p.Kind, p.Target, saga.PausedMayHaveRun)})
		return c.commitEvent(ctx, msg, st, plan, saga.Event{Kind: saga.EventResult, Now: now.UTC(), Err: why, Carrier: carrier}, HandledStep)
	}
	delay := c.cfg.PausePoll
	if !p.Until.IsZero() {
		delay = min(delay, p.Until.Sub(now))
	}
	if !cur.Compensating && !st.Deadline.IsZero() {
		// Come back just after the deadline, which then fires: a paused
		// step never holds a saga past it.
		delay = min(delay, st.Deadline.Sub(now)+time.Second)
	}
	if err := c.deferStep(ctx, msg, st, delay); err != nil {
		return "", err
	}
	c.logHandled(ctx, msg, st, HandledPaused, 0)
	return HandledPaused, nil
}

// PauseParams pauses the steps of a saga name or the calls of an action.
type PauseParams struct {
	Kind   durable.PauseKind // durable.PauseName or durable.PauseAction
	Target string            // the saga name or the action
	// Until, when set, ends the pause by itself; zero: until Unpause.
	Until time.Time
	// Compensations: hold the compensations it matches too.
	Compensations bool
}

// ErrNoPauses: the store keeps no pauses (it does not implement
// durable.Pauses).
var ErrNoPauses = errors.New("this store keeps no pauses")

func (c *Coordinator) pauseStore() (durable.Pauses, error) {
	if c.pauses.store == nil {
		return nil, ErrNoPauses
	}
	return c.pauses.store, nil
}

// Pause stores a pause, replacing the one of the same kind and target.
// Workers of other processes see it within PauseTTL.
func (c *Coordinator) Pause(ctx context.Context, p *PauseParams) error {
	ps, err := c.pauseStore()
	if err != nil {
		return err
	}
	now := c.cfg.Clock.Now().UTC()
	if !p.Until.IsZero() && !now.Before(p.Until) {
		return fmt.Errorf("pause %s %s: until %s has passed", p.Kind, p.Target, p.Until.UTC().Format(time.RFC3339))
	}
	err = ps.PausePut(ctx, &durable.PausePutParams{Pause: durable.Pause{Kind: p.Kind, Target: p.Target, Until: p.Until, Compensations: p.Compensations, CreatedAt: now}})
	c.pauses.forget()
	return err
}

// Unpause deletes the pause of kind and target: durable.ErrNotFound when
// there is none. The deferred steps run within PausePoll.
func (c *Coordinator) Unpause(ctx context.Context, kind durable.PauseKind, target string) error {
	ps, err := c.pauseStore()
	if err != nil {
		return err
	}
	err = ps.PauseDelete(ctx, &durable.PauseDeleteParams{Kind: kind, Target: target})
	c.pauses.forget()
	return err
}

// Pauses lists the pauses stored, by kind then target, expired ones
// included (Pause.Active tells them apart), with a consistent read.
func (c *Coordinator) Pauses(ctx context.Context) ([]durable.Pause, error) {
	ps, err := c.pauseStore()
	if err != nil {
		return nil, err
	}
	return ps.PauseList(ctx, &durable.PauseListParams{Consistent: true})
}

// PausedBy returns the pause that holds the step st waits on, if one does
// now (the pauses as this process last read them): what sagactl status
// shows for a saga whose next step is paused.
func (c *Coordinator) PausedBy(ctx context.Context, st *saga.State) (durable.Pause, bool, error) {
	cur, ok := st.Pending()
	if !ok || st.Status.Final() {
		return durable.Pause{}, false, nil
	}
	plan, err := c.cfg.Plans.Get(ctx, st.DefinitionHash)
	if err != nil {
		return durable.Pause{}, false, err
	}
	p, ok := c.pausedBy(ctx, plan, cur, c.cfg.Clock.Now())
	return p, ok, nil
}
