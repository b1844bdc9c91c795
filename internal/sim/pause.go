package sim

import (
	"context"
	"maps"
	"slices"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Pauses (docs/PROTOCOL.md, "Pauses"): while faults are on, an operator
// pauses an action or a saga name the sagas use for a while, some
// pauses holding compensations too, then unpauses it; every pause is
// lifted before the run ends. The checks: no paused call runs while its
// pause holds (paused_not_run), a deferral writes nothing, so it spends
// no attempt (deferral_writes_nothing), and, by the usual checks, every
// saga still ends and every success is compensated if its saga
// compensates.

// pauseEvery is how many deliveries a pause holds, and how many pass
// between two pauses.
const pauseEvery = 2000

// pauseLedger is what the operator paused, and what the sagas call.
type pauseLedger struct {
	active  []durable.Pause // in force now, made through the run's coordinator (whose cache forgets at once)
	actions []string        // the actions called so far, in the order first called
	names   []string        // the saga names started, in the order first started
	seen    map[string]bool
	// deferred holds "saga/step" of every step a deferral held; ever,
	// "kind#target" of every pause made.
	deferred, ever map[string]bool
}

// mayHaveHeld reports whether a pause may have held an attempt of call's
// step: a deferral did, or a pause of its action or its saga's name was
// made (a cancel or the deadline may have met the held attempt on its
// first delivery, and taken it as unknown without a deferral).
func (l *pauseLedger) mayHaveHeld(w *world, call saga.Call) bool {
	if l.deferred[call.SagaID+"/"+call.Step] || l.ever[string(durable.PauseAction)+"#"+call.Action] {
		return true
	}
	rec, err := w.store.Store.SagaGet(context.Background(), &durable.SagaGetParams{SagaID: call.SagaID})
	return err == nil && l.ever[string(durable.PauseName)+"#"+rec.Name]
}

func (l *pauseLedger) note(kind durable.PauseKind, target string) {
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	k := string(kind) + "#" + target
	if l.seen[k] {
		return
	}
	l.seen[k] = true
	if kind == durable.PauseAction {
		l.actions = append(l.actions, target)
	} else {
		l.names = append(l.names, target)
	}
}

// PausePut, PauseDelete and PauseList pass the memory store's pauses on,
// without faults: a worker that cannot read them keeps those it read
// (engine.pauseCache), which the run's one coordinator always has.
func (s *faultyStore) PausePut(ctx context.Context, p *durable.PausePutParams) error {
	return s.Store.(durable.Pauses).PausePut(ctx, p)
}

func (s *faultyStore) PauseDelete(ctx context.Context, p *durable.PauseDeleteParams) error {
	return s.Store.(durable.Pauses).PauseDelete(ctx, p)
}

func (s *faultyStore) PauseList(ctx context.Context, p *durable.PauseListParams) ([]durable.Pause, error) {
	return s.Store.(durable.Pauses).PauseList(ctx, p)
}

// pauseTick pauses or unpauses at the run's step steps of phase: every
// pauseEvery deliveries while faults are on, and lifts every pause when
// they are off.
func (w *world) pauseTick(ctx context.Context, phase, steps int) {
	l := &w.pauses
	if w.cfg.NoPauses {
		return
	}
	if phase > 0 || steps%pauseEvery != 0 || steps == 0 {
		if phase > 0 && len(l.active) > 0 {
			w.unpauseAll(ctx)
		}
		return
	}
	if len(l.active) > 0 {
		w.unpauseAll(ctx)
		return
	}
	kind, from := durable.PauseAction, l.actions
	if w.rng.IntN(3) == 0 {
		kind, from = durable.PauseName, l.names
	}
	if len(from) == 0 {
		return
	}
	p := engine.PauseParams{Kind: kind, Target: from[w.rng.IntN(len(from))], Compensations: w.rng.IntN(4) == 0}
	if err := w.coord.Pause(ctx, &p); err != nil {
		w.violate("paused_not_run", "pause %s %s: %v", p.Kind, p.Target, err)
		return
	}
	l.active = append(l.active, durable.Pause{Kind: p.Kind, Target: p.Target, Compensations: p.Compensations})
	if l.ever == nil {
		l.ever = map[string]bool{}
	}
	l.ever[string(p.Kind)+"#"+p.Target] = true
	w.report.Faults["pause_"+string(kind)]++
}

func (w *world) unpauseAll(ctx context.Context) {
	for _, p := range w.pauses.active {
		if err := w.coord.Unpause(ctx, p.Kind, p.Target); err != nil {
			w.violate("paused_not_run", "unpause %s %s: %v", p.Kind, p.Target, err)
		}
	}
	w.pauses.active = w.pauses.active[:0]
}

// checkPaused is called with every call the coordinator makes: none may
// be one a pause holds. A compensating saga's calls are held only by a
// pause with Compensations, but for the finding out of an unknown
// outcome, a call of the paused action itself, which a pause of that
// action holds.
func (w *world) checkPaused(ctx context.Context, call saga.Call) {
	l := &w.pauses
	l.note(durable.PauseAction, call.Action)
	if len(l.active) == 0 {
		return
	}
	rec, err := w.store.Store.SagaGet(ctx, &durable.SagaGetParams{SagaID: call.SagaID})
	if err != nil {
		return
	}
	w.report.Checks["paused_not_run"]++
	for _, p := range l.active {
		byAction := p.Kind == durable.PauseAction && p.Target == call.Action
		match := byAction || p.Kind == durable.PauseName && p.Target == rec.Name
		// A compensating saga's forward call finds out an unknown
		// outcome: it calls the paused action itself.
		findingOut := rec.Status == durable.StatusCompensating && !call.Compensation
		if match && (rec.Status != durable.StatusCompensating || p.Compensations || byAction && findingOut) {
			w.violate("paused_not_run", "saga %s (%s, %s) called %s attempt %d while %s %s was paused", call.SagaID, rec.Name, rec.Status, call.Action, call.Attempt, p.Kind, p.Target)
		}
	}
}

// checkDeferral checks a handled message's outcome: a deferral of a
// paused attempt writes nothing (so it spends no attempt).
func (w *world) checkDeferral(out engine.Outcome, d *delivery) {
	if out != engine.HandledPaused {
		return
	}
	sagaID := d.sagaID
	if msg, err := durable.DecodeMessage(d.body); err == nil {
		if w.pauses.deferred == nil {
			w.pauses.deferred = map[string]bool{}
		}
		w.pauses.deferred[msg.SagaID+"/"+msg.Step] = true
	}
	w.report.Checks["deferral_writes_nothing"]++
	if top := w.top(); len(top.wrote) > 0 || len(top.calls) > 0 {
		w.violate("deferral_writes_nothing", "saga %s: a deferred message wrote %v and called %d actions", sagaID, slices.Sorted(maps.Keys(top.wrote)), len(top.calls))
	}
}
