package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// behaviour is what an action does on an attempt.
type behaviour uint8

const (
	succeed behaviour = iota
	failRetryable
	failPermanent
	timeoutAfterEffect // applies its effect, then reports a timeout
	// The action runs until its context ends (the step timeout, or the
	// invocation's deadline less saga.ResultReserve) and the attempt is
	// a Timeout: after applying its effect (done, result lost) or before.
	deadlineAfterEffect
	deadlineBeforeEffect
	// A service that does not answer: a timeout, no effect. Scripted for
	// every forward attempt and past them, so that compensating cannot
	// find the outcome out (the saga parks) until an operator resumes.
	unreachable
)

// callScript is how the calls of one visit to a step (one idempotency
// key) behave.
type callScript struct {
	attempts []behaviour // attempts 1, 2, ...; past the list, attempts succeed
	output   any         // the output of a success; nil: the usual one
	huge     bool        // failures carry a 1 MB message and a 10 KB type
}

// script decides, per saga, how each action and compensation behaves.
type script struct {
	spec *sagaSpec
	// calls is drawn at the first call of each idempotency key, so every
	// visit of a step in a loop gets its own behaviour.
	calls map[string]*callScript
	// stubborn steps fail on every visit: a loop through their catch ends
	// only at the plan's visit limit.
	stubborn map[string]bool
	// comp[step] lists the behaviour of compensation attempts before any
	// resume; after a resume, compensations succeed.
	comp    map[string][]behaviour
	resumed int
	// lateResumes counts resumes an operator scheduled long after the
	// saga parked; past a few, the end of the run resumes it.
	lateResumes int
	// cancelDuring is a step whose first call cancels the saga before it
	// returns (a cancel that lands while the action runs).
	cancelDuring string
	// cancels says how the client cancelled, for the violation reports.
	cancels []string
}

// simActions is every action of the simulated services. Services honour
// idempotency keys: an effect applies once per key, and a call with a key
// whose effect applied returns the same success. The services' ledger
// (applied, succeeded) is what the checks compare the engine's records with.
type simActions struct {
	w         *world
	scripts   map[string]*script
	applied   map[string]bool   // key -> effect applied
	succeeded map[string]bool   // key -> the service returned success for it
	outputs   map[string]any    // key -> the output its success returned
	owner     map[string]string // key -> saga/step(/compensate): a key belongs to one visit of one step
	compKey   map[string]bool   // keys of compensation calls
	visits    map[string]int    // saga, and saga/step -> distinct forward keys (action visits)
	// timedOut marks keys whose effect a call applied and then reported
	// as a Timeout (done, result lost).
	timedOut map[string]bool
	// duplicates counts effects applied more than once for one key (only
	// when sabotaged: honest services never do).
	duplicates map[string]int
}

func newSimActions(w *world) *simActions {
	return &simActions{w: w, scripts: map[string]*script{}, applied: map[string]bool{}, succeeded: map[string]bool{}, outputs: map[string]any{},
		owner: map[string]string{}, compKey: map[string]bool{}, visits: map[string]int{}, timedOut: map[string]bool{}, duplicates: map[string]int{}}
}

// Values at and past the limits, built once and shared: outputs of
// MaxStateBytes and around it, values nested around MaxDataDepth, and
// error messages and types far longer than anything kept in state.
var (
	bigSizes  = []int{saga.MaxStateBytes - 4096, saga.MaxStateBytes - 200, saga.MaxStateBytes, saga.MaxStateBytes + 1, 2 * saga.MaxStateBytes}
	bigBlobs  = map[int]string{}
	deepSizes = []int{saga.MaxDataDepth - 2, saga.MaxDataDepth - 1, saga.MaxDataDepth, saga.MaxDataDepth + 1, saga.MaxDataDepth + 5}
	deepVals  = map[int]any{}
	hugeMsg   = strings.Repeat("m", 1<<20)
	hugeType  = strings.Repeat("T", 10<<10)
)

func init() {
	for _, n := range bigSizes {
		bigBlobs[n] = strings.Repeat("b", n)
	}
	for _, d := range deepSizes {
		var v any = "leaf"
		for range d {
			v = map[string]any{"k": v}
		}
		deepVals[d] = v
	}
}

func (a *simActions) Invoke(ctx context.Context, call saga.Call) (any, error) {
	w := a.w
	w.report.Checks["stable_idempotency_key"]++
	key := call.IdempotencyKey
	owner := call.SagaID + "/" + call.Step
	if call.Compensation {
		owner += "/compensate"
		a.compKey[key] = true
	}
	if key == "" || !strings.HasPrefix(key, call.SagaID+"/") {
		w.violate("stable_idempotency_key", "call %s attempt %d has key %q", owner, call.Attempt, key)
	} else if prev, ok := a.owner[key]; ok && prev != owner {
		w.violate("stable_idempotency_key", "key %q used by %s and %s", key, prev, owner)
	} else if !ok && call.Attempt > 1 && !w.pauses.mayHaveHeld(w, call) {
		// A later attempt of one visit runs only after an earlier one
		// called the action: its key must be one already seen. But for a
		// step a pause deferred: a cancel or the deadline takes its held
		// attempt as unknown, never called, and finding it out is the
		// next attempt (pause.go).
		w.violate("stable_idempotency_key", "call %s attempt %d has key %q, which no earlier attempt used", owner, call.Attempt, key)
	}
	if _, seen := a.owner[key]; !seen && !call.Compensation {
		if a.visits[owner] > 0 {
			w.report.Faults["catch_loop_lap"]++ // the step again, on a new visit
		}
		a.visits[owner]++
		a.visits[call.SagaID]++
		if sp := a.scripts[call.SagaID].spec; a.visits[call.SagaID] > 2*sp.maxVisits {
			w.quarantine(call.SagaID)
		}
	}
	a.owner[key] = owner
	if !call.Compensation {
		w.forks.forward[call.SagaID]++
	}
	if a.applied[key] && w.cfg.Sabotage != "ignore-idempotency-keys" {
		a.succeeded[key] = true
		return a.outputs[key], nil // the same success again
	}
	if a.applied[key] {
		a.duplicates[key]++ // the sabotaged service applies the effect again
	}
	sc := a.scripts[call.SagaID]
	w.duringAction(ctx, call, sc)
	if !call.Compensation && sc.cancelDuring == call.Step {
		sc.cancelDuring = ""
		sc.cancels = append(sc.cancels, "while "+call.Step+" ran")
		w.report.Faults["cancel_during_action"]++
		w.cancel(ctx, call.SagaID)
	}
	var cs *callScript
	var list []behaviour
	if call.Compensation {
		if sc.resumed == 0 {
			list = sc.comp[call.Step]
		}
	} else {
		cs = a.draw(sc, call)
		list = cs.attempts
	}
	b := succeed
	if call.Attempt-1 < len(list) {
		b = list[call.Attempt-1]
	}
	typ, msg := "Rejected", call.Action+" rejected"
	huge := cs != nil && cs.huge && (b == failRetryable || b == failPermanent)
	if huge {
		typ, msg = hugeType, hugeMsg
		w.report.Faults["error_of_1MB_type_of_10KB"]++
	}
	switch b {
	case failRetryable:
		if huge {
			return nil, saga.NewError(typ, msg)
		}
		return nil, fmt.Errorf("%s: service unavailable", call.Action)
	case failPermanent:
		return nil, saga.Permanent(saga.NewError(typ, msg))
	case timeoutAfterEffect:
		a.applied[key], a.timedOut[key] = true, true
		w.forks.noteApplied(key)
		a.outputs[key] = a.output(cs, call)
		w.report.Faults["timeout_after_effect"]++
		return nil, saga.NewError(lang.ErrorTypeTimeout, call.Action+" timed out after doing its work")
	case unreachable:
		w.report.Faults["unreachable"]++
		return nil, saga.NewError(lang.ErrorTypeTimeout, call.Action+" did not answer")
	case deadlineAfterEffect, deadlineBeforeEffect:
		// Runs until its context ends: the step timeout, or what the
		// invocation leaves it (a 30 s function less ResultReserve).
		d := call.Timeout
		if d <= 0 {
			d = 30*time.Second - saga.ResultReserve
		}
		w.clock.Advance(d)
		w.report.Faults["deadline_cut_off"]++
		if b == deadlineAfterEffect {
			a.applied[key], a.timedOut[key] = true, true
			w.forks.noteApplied(key)
			w.forks.noteApplied(key)
			a.outputs[key] = a.output(cs, call)
			w.report.Faults["deadline_cut_off_after_effect"]++
		}
		return nil, saga.NewError(lang.ErrorTypeTimeout, call.Action+" ran until its context ended")
	}
	a.applied[key] = true
	a.succeeded[key] = true
	w.forks.noteApplied(key)
	out := a.output(cs, call)
	a.outputs[key] = out
	return out, nil
}

// draw returns the script of call's visit, drawing it at its first call.
func (a *simActions) draw(sc *script, call saga.Call) *callScript {
	if cs, ok := sc.calls[call.IdempotencyKey]; ok {
		return cs
	}
	w := a.w
	attempts := lang.DefaultRetry.Attempts
	if st, ok := sc.spec.plan.Step(call.Step); ok && st.Retry != nil {
		attempts = st.Retry.Attempts
	}
	cs := &callScript{}
	switch {
	case sc.stubborn[call.Step]:
		cs.attempts = []behaviour{failPermanent}
	default:
		cs.attempts = w.pick(attempts, 0.05, 0.03, 0.07)
	}
	if sc.spec.generated && !sc.stubborn[call.Step] {
		r, edge := w.rng.Float64(), w.cfg.EdgeRate
		switch {
		case r < edge/2:
			n := bigSizes[w.rng.IntN(len(bigSizes))]
			cs.output = map[string]any{"id": call.IdempotencyKey, "blob": bigBlobs[n]}
			if n > saga.MaxStateBytes {
				w.report.Faults["output_past_state_limit"]++
			} else {
				w.report.Faults["output_near_state_limit"]++
			}
		case r < edge:
			d := deepSizes[w.rng.IntN(len(deepSizes))]
			cs.output = deepVals[d]
			if d > saga.MaxDataDepth {
				w.report.Faults["output_past_depth_limit"]++
			} else {
				w.report.Faults["output_near_depth_limit"]++
			}
		case r < edge+0.02:
			i := w.rng.IntN(attempts)
			cs.attempts = make([]behaviour, i+1)
			for j := range i {
				cs.attempts[j] = failRetryable
			}
			cs.attempts[i] = deadlineBeforeEffect
			if w.rng.IntN(2) == 0 {
				cs.attempts[i] = deadlineAfterEffect
			}
		}
		cs.huge = w.rng.IntN(20) == 0
	}
	sc.calls[call.IdempotencyKey] = cs
	return cs
}

// output is what a success returns: the scripted one, or the key (and,
// for generated sagas, the call's input echoed back, as services often
// do: a large input grows the state with every such step).
func (a *simActions) output(cs *callScript, call saga.Call) any {
	if cs != nil && cs.output != nil {
		return cs.output
	}
	if cs != nil && call.Input != nil {
		return map[string]any{"id": call.IdempotencyKey, "in": call.Input}
	}
	return map[string]any{"id": call.IdempotencyKey}
}

// cancel is a client cancelling a saga, retrying a cancel that crashed,
// was throttled or lost a race, as a client would.
func (w *world) cancel(ctx context.Context, sagaID string) {
	prev := w.delivery
	w.delivery = nil
	defer func() { w.delivery = prev }()
	for range 20 {
		w.bufs = append(w.bufs, &handleLog{})
		if debugTrace != "" && strings.HasPrefix(sagaID, debugTrace) {
			w.tracing++
			fmt.Printf("%s cancel %s\n", w.clock.Now().Format("15:04:05.000"), sagaID)
		}
		st, err := w.coord.Cancel(ctx, sagaID)
		if err == nil {
			w.operated[fmt.Sprintf("%s@%d", sagaID, st.Version)] = verbCancel
		}
		if debugTrace != "" && strings.HasPrefix(sagaID, debugTrace) {
			w.tracing--
			fmt.Printf("%s   cancel -> %v\n", w.clock.Now().Format("15:04:05.000"), err)
		}
		w.bufs = w.bufs[:len(w.bufs)-1]
		if err == nil || errors.Is(err, saga.ErrInvalidEvent) || errors.Is(err, durable.ErrNotFound) {
			return
		}
	}
}

// loggedCall is a call as the engine saw it: ok when it got a success.
type loggedCall struct {
	saga.Call
	ok bool
}

// recorder sits between the coordinator and the services: it logs every
// call and whether the engine got a success, for the handle's log.
type recorder struct {
	w     *world
	inner engine.Invoker
}

func (r recorder) Invoke(ctx context.Context, call saga.Call) (any, error) {
	w := r.w
	if w.gone() {
		return nil, errCrash // a dead worker calls no one
	}
	w.checkPaused(ctx, call)
	chained := len(w.bufs) > 0 && w.top().wrote[call.SagaID]
	if chained {
		w.chainedStep(ctx, call)
	}
	w.limitedCall(call)
	out, err := r.inner.Invoke(ctx, call)
	top := w.callLog(call.SagaID)
	top.calls = append(top.calls, loggedCall{Call: call, ok: err == nil})
	if chained && w.fault("chain_crash_mid_action") {
		// The worker dies while a chained action runs, after its effect:
		// the carrier comes back (the carrier rule).
		return nil, errCrash
	}
	return out, err
}

// chainedStep injects the faults of a chain as one of its steps starts:
// the carrier delivered again to another worker (its visibility passed),
// and a client's cancel between two chained steps.
func (w *world) chainedStep(ctx context.Context, call saga.Call) {
	w.report.Faults["chained_step"]++
	if d := w.delivery; d != nil && w.depth < 3 && w.fault("chain_carrier_back") {
		w.handle(ctx, d)
	}
	if sc := w.actions.scripts[call.SagaID]; sc != nil && !call.Compensation && w.fault("chain_cancel_between_steps") {
		sc.cancels = append(sc.cancels, "between chained steps")
		w.cancel(ctx, call.SagaID)
	}
}

// discardLarge is the sabotage "discard-large-results": a broken engine
// that throws away a result too large to keep and fails the step, so an
// effect the service applied (and reported done) is never compensated.
type discardLarge struct {
	w     *world
	inner engine.Invoker
}

func (d discardLarge) Invoke(ctx context.Context, call saga.Call) (any, error) {
	out, err := d.inner.Invoke(ctx, call)
	if err != nil || call.Compensation {
		return out, err
	}
	if b, jerr := json.Marshal(out); jerr == nil && len(b) > saga.MaxStateBytes {
		d.w.report.Faults["sabotage_result_discarded"]++
		return nil, saga.Permanent(saga.NewError("ResultDiscarded", "result too large: thrown away"))
	}
	return out, err
}
