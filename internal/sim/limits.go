package sim

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Action limits (docs/PROTOCOL.md, "Action limits"): a run limits a few
// of its actions, compensations among them, through the memory store's
// limits, with faults: a count or a lease throttled before it lands, or
// after (its answer lost), a release lost (the slot lapses), a worker
// that dies with its slot. Calls over a limit are deferred, their
// messages sent again with a delay; the contract's invariants must hold
// all the same, and two more are checked as each limited call starts:
//
//   - limit_call_leased: under a concurrency, the call's attempt holds a
//     live lease (taken, not released, not lapsed), and no more than the
//     concurrency are live: the modelled calls in flight, counting those
//     of dead workers until their lease lapses, never pass it;
//   - limit_rate_window: under a rate, no window sees more calls start
//     than its burst.
var simLimits = []durable.Limit{
	{Action: "bank.debit", Rate: 20, Burst: 2},
	{Action: "bank.debit_back", Rate: 10, Burst: 1, Concurrency: 5}, // a compensation
	{Action: "mail.retract", Concurrency: 2},                        // a compensation
}

// simInvocation bounds every lease as a Lambda function's timeout does:
// the simulation's handles have no deadline, so a call without a timeout
// of its own would lease its slot for 15 minutes, and every crash
// (several in a hundred handles here) would hold one that long.
const simInvocation = 30 * time.Second

// limitedStore is the coordinator's store: the faulty store, and limits.
type limitedStore struct {
	*faultyStore
	lim *simLimiter
}

func (s limitedStore) LimitPut(ctx context.Context, p *durable.LimitPutParams) error {
	return s.lim.LimitPut(ctx, p)
}
func (s limitedStore) LimitDelete(ctx context.Context, p *durable.LimitDeleteParams) error {
	return s.lim.LimitDelete(ctx, p)
}
func (s limitedStore) LimitList(ctx context.Context, p *durable.LimitListParams) ([]durable.Limit, error) {
	return s.lim.LimitList(ctx, p)
}
func (s limitedStore) LimitTake(ctx context.Context, p *durable.LimitTakeParams) error {
	return s.lim.LimitTake(ctx, p)
}
func (s limitedStore) LimitLease(ctx context.Context, p *durable.LimitLeaseParams) error {
	return s.lim.LimitLease(ctx, p)
}
func (s limitedStore) LimitRelease(ctx context.Context, p *durable.LimitReleaseParams) error {
	return s.lim.LimitRelease(ctx, p)
}

// simLimiter is the memory store's limits with faults, and a mirror of
// the leases and window counts the checks read.
type simLimiter struct {
	durable.Limiter
	w      *world
	clock  durable.Clock                       // the coordinator's
	leases map[string]durable.LimitLeaseParams // by action and slot
	calls  map[string]int                      // calls started, by action and window
}

func newSimLimiter(w *world, inner durable.Limiter, clock durable.Clock) *simLimiter {
	return &simLimiter{Limiter: inner, w: w, clock: clock, leases: map[string]durable.LimitLeaseParams{}, calls: map[string]int{}}
}

func slotKey(action string, slot int) string { return action + "#" + strconv.Itoa(slot) }

func (l *simLimiter) LimitTake(ctx context.Context, p *durable.LimitTakeParams) error {
	if l.w.gone() {
		return errCrash
	}
	if l.w.fault("limit_throttled") {
		return fmt.Errorf("count a call of %s: %w", p.Action, durable.ErrThrottled)
	}
	err := l.Limiter.LimitTake(ctx, p)
	if err == nil && l.w.fault("limit_answer_lost") {
		return fmt.Errorf("count a call of %s: %w", p.Action, durable.ErrThrottled) // counted, the answer lost
	}
	return err
}

func (l *simLimiter) LimitLease(ctx context.Context, p *durable.LimitLeaseParams) error {
	if l.w.gone() {
		return errCrash
	}
	if l.w.fault("limit_throttled") {
		return fmt.Errorf("lease a slot of %s: %w", p.Action, durable.ErrThrottled)
	}
	if bound := p.Now.Add(simInvocation); p.Until.After(bound) {
		q := *p
		q.Until, p = bound, &q
	}
	err := l.Limiter.LimitLease(ctx, p)
	if err == nil {
		l.leases[slotKey(p.Action, p.Slot)] = *p
		if l.w.fault("limit_answer_lost") {
			return fmt.Errorf("lease a slot of %s: %w", p.Action, durable.ErrThrottled) // leased, the answer lost
		}
	}
	return err
}

func (l *simLimiter) LimitRelease(ctx context.Context, p *durable.LimitReleaseParams) error {
	if l.w.gone() || l.w.fault("limit_release_lost") {
		return errCrash // the slot lapses
	}
	err := l.Limiter.LimitRelease(ctx, p)
	if held, ok := l.leases[slotKey(p.Action, p.Slot)]; err == nil && ok && held.Holder == p.Holder {
		delete(l.leases, slotKey(p.Action, p.Slot))
	}
	return err
}

// setLimits sets the run's limits.
func (w *world) setLimits(ctx context.Context) error {
	for _, l := range simLimits {
		if err := w.limits.Limiter.LimitPut(ctx, &durable.LimitPutParams{Limit: l}); err != nil {
			return err
		}
	}
	return nil
}

// limitedCall checks a call of a limited action as it starts.
func (w *world) limitedCall(call saga.Call) {
	var lim durable.Limit
	for _, l := range simLimits {
		if l.Action == call.Action {
			lim = l
		}
	}
	if lim.Action == "" || w.cfg.NoLimits {
		return
	}
	now := w.limits.clock.Now()
	r := w.report
	if lim.Concurrency > 0 {
		r.Checks["limit_call_leased"]++
		holder := call.IdempotencyKey + "#" + strconv.Itoa(call.Attempt)
		live, mine := 0, false
		for slot := range lim.Concurrency {
			if held, ok := w.limits.leases[slotKey(lim.Action, slot)]; ok && !held.Until.Before(now) {
				live++
				mine = mine || held.Holder == holder
			}
		}
		if !mine || live > lim.Concurrency {
			w.violate("limit_call_leased", "call of %s (saga %s, attempt %d) at %s: leased %v, %d live leases under a concurrency of %d", call.Action, call.SagaID, call.Attempt, now, mine, live, lim.Concurrency)
		}
	}
	if lim.Rate > 0 {
		r.Checks["limit_rate_window"]++
		key := lim.Action + "#" + strconv.FormatInt(now.UnixNano()/int64(lim.Window()), 10)
		w.limits.calls[key]++
		if n := w.limits.calls[key]; n > lim.Burst {
			w.violate("limit_rate_window", "%d calls of %s started in window %s, over its burst of %d", n, lim.Action, key, lim.Burst)
		}
	}
}
