package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Limits of an action (docs/PROTOCOL.md, "Limits"): a rate and a
// concurrency an operator sets (sagactl limit set), kept by a store that
// is a durable.Limiter and enforced across every saga and worker that
// calls the action, its compensations included (they call the same
// service). A call over a limit is deferred: its message is sent again
// with a short delay, no attempt spent, nothing written to the saga, its
// idempotency key the same. The limits are read at most every LimitsTTL
// per process, so an action without a limit costs no request.

// LimitsTTL is how long a process trusts the limits it read: a limit set
// or unset takes effect in every worker within it.
const LimitsTTL = 5 * time.Second

// HandledDeferred: the call was over its action's limit; its message was
// sent again with a delay, and nothing written.
const HandledDeferred Outcome = "deferred"

// limitRetry is the least a deferred call waits before it is tried
// again: SQS delays whole seconds.
const limitRetry = time.Second

// noTimeoutLease is how long a lease lasts for a call with no timeout
// and no invocation deadline: Lambda's longest invocation.
const noTimeoutLease = 15 * time.Minute

// limitCache is a process's view of the limits, and what it learnt of
// their shared state: windows it saw full, slots it released.
type limitCache struct {
	mu    sync.RWMutex
	until time.Time // read again from then on
	by    map[string]durable.Limit
	full  map[string]int64 // by action: the last window seen full here
	freed map[string]int   // by action: the slot last released here, likely free
	// holding: by action, the slots this process's calls hold; busy: by
	// action, until when it asks for no slot (two were held by others).
	holding map[string]map[int]bool
	busy    map[string]time.Time
}

// limitOf returns the action's limit, reading the limits again once
// LimitsTTL has passed since the last read. ok is false for an action
// without one (and for every action of a store that keeps none), at the
// cost of a map lookup.
func (c *Coordinator) limitOf(ctx context.Context, action string, now time.Time) (durable.Limit, bool) {
	lim, isLimiter := c.cfg.Store.(durable.Limiter)
	if !isLimiter {
		return durable.Limit{}, false
	}
	lc := &c.limits
	lc.mu.RLock()
	fresh := now.Before(lc.until)
	l, ok := lc.by[action]
	lc.mu.RUnlock()
	if fresh {
		return l, ok
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if now.Before(lc.until) {
		l, ok = lc.by[action]
		return l, ok
	}
	lc.until = now.Add(LimitsTTL) // a failed read is tried again then, the old limits kept
	ls, err := lim.LimitList(ctx, &durable.LimitListParams{})
	if err != nil {
		c.log.LogAttrs(ctx, slog.LevelWarn, "limits not read; the last ones read are kept", slog.String("error", err.Error()))
		l, ok = lc.by[action]
		return l, ok
	}
	by := make(map[string]durable.Limit, len(ls))
	for _, l := range ls {
		by[l.Action] = l
	}
	lc.by = by
	l, ok = by[action]
	return l, ok
}

// limitDeferral is the error of a call over its action's limit.
type limitDeferral struct {
	action string
	why    string        // "rate" or "concurrency"
	delay  time.Duration // before the call is tried again
}

func (d *limitDeferral) Error() string {
	return fmt.Sprintf("action %s over its %s limit: deferred %s", d.action, d.why, d.delay)
}

// lease is a concurrency slot a call holds, released after its outcome
// is written; the zero lease holds nothing.
type lease struct {
	action, holder string
	refused        error // set when the call is not admitted: a *limitDeferral, or the store's error
	slot           int
}

// admit lets call run under its action's limit, or returns a
// *limitDeferral. A concurrency slot it takes is put in held.
func (c *Coordinator) admit(ctx context.Context, call *saga.Call, now time.Time, held *lease) error {
	l, ok := c.limitOf(ctx, call.Action, now)
	if !ok {
		return nil
	}
	lim := c.cfg.Store.(durable.Limiter)
	lc := &c.limits
	var window int64
	var windowEnd time.Time
	if w := l.Window(); w > 0 {
		window = now.UnixNano() / int64(w)
		windowEnd = time.Unix(0, (window+1)*int64(w))
		lc.mu.RLock()
		full, seen := lc.full[call.Action]
		lc.mu.RUnlock()
		if seen && full == window {
			// Seen full by this process: no request to learn it again.
			return c.deferral(call.Action, "rate", windowEnd.Sub(now))
		}
	}
	if l.Concurrency > 0 {
		if err := c.leaseSlot(ctx, lim, l, call, now, held); err != nil {
			return err
		}
	}
	if l.Rate > 0 {
		b := l.Burst
		if b <= 0 {
			b = durable.DefaultBurst(l.Rate)
		}
		err := lim.LimitTake(ctx, &durable.LimitTakeParams{Action: call.Action, Window: window, Max: b, Expires: windowEnd})
		if err != nil {
			c.release(ctx, held)
			if !errors.Is(err, durable.ErrLimited) {
				return err
			}
			lc.mu.Lock()
			if lc.full == nil {
				lc.full = map[string]int64{}
			}
			lc.full[call.Action] = window
			lc.mu.Unlock()
			return c.deferral(call.Action, "rate", windowEnd.Sub(now))
		}
	}
	return nil
}

// leaseSlot takes one of the action's concurrency slots for call. What
// this process knows saves requests: it tries no slot it holds itself,
// the slot it released last first (likely free), and after two slots
// held by others it asks no more for busyFor, deferring at once. A lease
// lapses after the call's timeout and reserves.
func (c *Coordinator) leaseSlot(ctx context.Context, lim durable.Limiter, l durable.Limit, call *saga.Call, now time.Time, held *lease) error {
	lc := &c.limits
	lc.mu.Lock()
	if now.Before(lc.busy[call.Action]) {
		lc.mu.Unlock()
		return c.deferral(call.Action, "concurrency", 0)
	}
	mine := lc.holding[call.Action]
	var tries [2]int
	n := 0
	if slot, ok := lc.freed[call.Action]; ok && slot < l.Concurrency && !mine[slot] {
		tries[n], n = slot, n+1
	}
	for start, i := int(c.cfg.Rand()*float64(l.Concurrency)), 0; n < len(tries) && i < l.Concurrency; i++ {
		if slot := (start + i) % l.Concurrency; !mine[slot] && (n == 0 || tries[0] != slot) {
			tries[n], n = slot, n+1
		}
	}
	lc.mu.Unlock()
	if n == 0 {
		return c.deferral(call.Action, "concurrency", 0) // this process holds every slot
	}
	holder := call.IdempotencyKey + "#" + strconv.Itoa(call.Attempt)
	last := call.Timeout
	if last <= 0 {
		last = noTimeoutLease
		if dl, ok := ctx.Deadline(); ok {
			last = time.Until(dl) // the invocation's deadline is on the wall clock, as in timeLeft
		}
	}
	until := now.Add(last + saga.StartReserve + saga.ResultReserve)
	for _, slot := range tries[:n] {
		err := lim.LimitLease(ctx, &durable.LimitLeaseParams{Action: call.Action, Slot: slot, Holder: holder, Now: now, Until: until})
		if err == nil {
			*held = lease{action: call.Action, holder: holder, slot: slot}
			lc.note(call.Action, slot, true, false)
			return nil
		}
		if !errors.Is(err, durable.ErrLimited) {
			return err
		}
	}
	lc.mu.Lock()
	if lc.busy == nil {
		lc.busy = map[string]time.Time{}
	}
	lc.busy[call.Action] = now.Add(busyFor)
	lc.mu.Unlock()
	return c.deferral(call.Action, "concurrency", 0)
}

// busyFor is how long a process asks for no slot of an action after two
// were held by others: its calls are deferred a second or more anyway.
const busyFor = 200 * time.Millisecond

// note records that this process holds a slot, or no longer does (and
// whether it released it: then it is likely free).
func (lc *limitCache) note(action string, slot int, holding, released bool) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.holding == nil {
		lc.holding, lc.freed = map[string]map[int]bool{}, map[string]int{}
	}
	if lc.holding[action] == nil {
		lc.holding[action] = map[int]bool{}
	}
	if holding {
		lc.holding[action][slot] = true
		return
	}
	delete(lc.holding[action], slot)
	if released {
		lc.freed[action] = slot
		delete(lc.busy, action) // a slot is free now
	}
}

// release gives back the slot held, if any. A failure leaves the lease
// to lapse.
func (c *Coordinator) release(ctx context.Context, held *lease) {
	if held.holder == "" {
		return
	}
	err := c.cfg.Store.(durable.Limiter).LimitRelease(context.WithoutCancel(ctx), &durable.LimitReleaseParams{Action: held.action, Slot: held.slot, Holder: held.holder})
	if err != nil {
		c.log.LogAttrs(ctx, slog.LevelWarn, "concurrency slot not released; it lapses", slog.String("action", held.action), slog.Int("slot", held.slot), slog.String("error", err.Error()))
	}
	c.limits.note(held.action, held.slot, false, err == nil)
	*held = lease{}
}

// deferral is the error of a call deferred for wait at least, plus a
// second's jitter, so that the calls deferred together do not all come
// back in the same second.
func (c *Coordinator) deferral(action, why string, wait time.Duration) error {
	d := max(wait, 0) + limitRetry + time.Duration(c.cfg.Rand()*float64(time.Second))
	return &limitDeferral{action: action, why: why, delay: min(d, durable.MaxDelay)}
}

// deferCall sends msg again after the deferral's delay, and writes
// nothing: the call it carries was over its action's limit. The saga's
// deadline is not waited for here: the message, when it comes back after
// the deadline, fires it instead of running the call.
func (c *Coordinator) deferCall(ctx context.Context, msg durable.Message, st *saga.State, d *limitDeferral) (Outcome, error) {
	if err := c.deferStep(ctx, msg, st, d.delay); err != nil {
		return "", fmt.Errorf("%w: %w", d, err)
	}
	c.logHandled(ctx, msg, st, HandledDeferred, 0)
	return HandledDeferred, nil
}

// deferChained ends a chain before next, the message of a step whose
// call was over its limit: next is sent after the deferral's delay, as
// the last version's outbox, instead of at once.
func (c *Coordinator) deferChained(ctx context.Context, next durable.Message, st *saga.State, d *limitDeferral) (Outcome, error) {
	if _, err := c.deferCall(ctx, next, st, d); err != nil {
		return "", err
	}
	return HandledStep, nil
}

// deferredPastDeadline is the outcome of a forward call refused by its
// limit once its saga's deadline has passed: it is not deferred again
// but fails as an attempt that ran into its deadline. An earlier delivery
// of the same attempt may have run it (a worker that died before its
// write), so, like a timeout, its outcome is unknown: the saga's
// deadline compensates it, finding it out first under its key (and the
// same limit). Nil when the call is to be deferred: the deadline has not
// passed, it is a compensation (which runs whatever the deadline), or
// the refusal is the store's error.
func deferredPastDeadline(st *saga.State, cur saga.Cursor, now time.Time, refused error) error {
	d, ok := refused.(*limitDeferral)
	if !ok || cur.Compensating || st.Deadline.IsZero() || now.Before(st.Deadline) {
		return nil
	}
	return &saga.ActionError{Type: lang.ErrorTypeTimeout, Message: fmt.Sprintf("action %s was over its %s limit until the saga's deadline: deferred, not run by this delivery", d.action, d.why)}
}

// ErrNoLimits: the store keeps no limits (it is not a durable.Limiter).
var ErrNoLimits = errors.New("this store keeps no action limits")

func (c *Coordinator) limiter() (durable.Limiter, error) {
	lim, ok := c.cfg.Store.(durable.Limiter)
	if !ok {
		return nil, ErrNoLimits
	}
	return lim, nil
}

// SetLimit sets an action's limit, replacing any it had: every worker
// enforces it within LimitsTTL, this process at once.
func (c *Coordinator) SetLimit(ctx context.Context, l durable.Limit) error {
	if err := l.Check(); err != nil {
		return err
	}
	lim, err := c.limiter()
	if err != nil {
		return err
	}
	if err := lim.LimitPut(ctx, &durable.LimitPutParams{Limit: l}); err != nil {
		return err
	}
	c.forgetLimits()
	return nil
}

// UnsetLimit removes an action's limit: durable.ErrNotFound when it has
// none.
func (c *Coordinator) UnsetLimit(ctx context.Context, action string) error {
	lim, err := c.limiter()
	if err != nil {
		return err
	}
	if err := lim.LimitDelete(ctx, &durable.LimitDeleteParams{Action: action}); err != nil {
		return err
	}
	c.forgetLimits()
	return nil
}

// Limits returns every action's limit, by action name, as stored now.
func (c *Coordinator) Limits(ctx context.Context) ([]durable.Limit, error) {
	lim, err := c.limiter()
	if err != nil {
		return nil, err
	}
	return lim.LimitList(ctx, &durable.LimitListParams{Consistent: true})
}

// forgetLimits makes the next call read the limits again.
func (c *Coordinator) forgetLimits() {
	c.limits.mu.Lock()
	c.limits.until = time.Time{}
	c.limits.mu.Unlock()
}
