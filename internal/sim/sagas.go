package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// The simulated sagas: money moved between accounts (a switch, a caught
// failure, three compensable steps) and a trip (a fail step on request).
const transferDef = `
saga: transfer
input: {amount: int}
steps:
  - id: debit
    action: bank.debit
    with: {amount: "${input.amount}"}
    out: debit
    retry: {attempts: 4, backoff: 1s, max_backoff: 8s}
    compensate:
      action: bank.credit_back
      with: {ref: "${vars.debit.id}"}
      retry: {attempts: 4, backoff: 1s, max_backoff: 8s}
  - id: check
    switch: [{if: "input.amount > 500", next: review}, {default: credit}]
  - id: review
    action: risk.review
    retry: {attempts: 3, backoff: 1s}
    catch: [{errors: ["*"], next: credit}]
  - id: credit
    action: bank.credit
    with: {amount: "${input.amount}"}
    out: credit
    retry: {attempts: 4, backoff: 2s}
    compensate: {action: bank.debit_back, with: {ref: "${vars.credit.id}"}, retry: {attempts: 4, backoff: 1s}}
  - id: notify
    action: mail.send
    retry: {attempts: 3, backoff: 1s}
    compensate: {action: mail.retract, retry: {attempts: 3, backoff: 1s}}
  - id: audit
    action: audit.log
    retry: {attempts: 3, backoff: 1s}
`

const tripDef = `
saga: trip
input: {cancel: bool}
steps:
  - {id: flight, action: flights.book, out: flight, compensate: {action: flights.cancel, with: {ref: "${vars.flight.id}"}}}
  - {id: hotel, action: hotels.book, out: hotel, compensate: {action: hotels.cancel, with: {ref: "${vars.hotel.id}"}}}
  - id: decide
    switch: [{if: "input.cancel", next: stop}, {default: car}]
  - {id: car, action: cars.rent, out: car, compensate: {action: cars.return}}
  - {id: done, succeed: {output: "${vars}"}}
  - {id: stop, fail: {error: ChangedMind}}
`

type plansByName map[string]*saga.Plan

func compilePlans() (plansByName, error) {
	out := plansByName{}
	for name, src := range map[string]string{"transfer": transferDef, "trip": tripDef} {
		p, err := saga.Compile(name+".yaml", []byte(src), saga.Options{})
		if err != nil {
			return nil, err
		}
		out[name] = p
	}
	return out, nil
}

type sagaSpec struct {
	id        string
	plan      *saga.Plan
	input     map[string]any
	generated bool // a generated definition (gen.go, forkgen.go): its actions' outputs reach the limits
	maxVisits int  // the plan's visit bound
	child     bool // a child run: a branch, an iteration or a child saga (forkgen.go)
}

// newSaga picks a saga, its input and its script from the random source:
// a third each run the transfer, the trip and a generated definition.
func (w *world) newSaga(i int, plans plansByName, gen, forks []*saga.Plan) *sagaSpec {
	s := &sagaSpec{id: fmt.Sprintf("s%d-%d", w.cfg.Seed, i), maxVisits: saga.DefaultMaxVisits}
	n := 3
	if len(forks) > 0 {
		n = 4
	}
	switch r := w.rng.IntN(n); {
	case r == 3:
		s.plan, s.generated, s.maxVisits = forks[w.rng.IntN(len(forks))], true, genMaxVisits
		s.input = map[string]any{"n": int64(w.rng.IntN(1000)), "items": w.forkItems()}
		w.report.ForkSagas++
		if w.rng.IntN(6) == 0 {
			// A client cancels while the children run (or before, or after).
			at := w.clock.Now().Add(time.Duration(w.rng.Int64N(int64(5 * time.Minute))))
			w.queue.addOp(at, func(ctx context.Context) {
				w.report.Faults["cancel_during_fork"]++
				w.actions.scripts[s.id].cancels = append(w.actions.scripts[s.id].cancels, "while its children may run")
				w.cancel(ctx, s.id)
			})
		}
	case r == 2 && len(gen) > 0:
		s.plan, s.generated, s.maxVisits = gen[w.rng.IntN(len(gen))], true, genMaxVisits
		blob := ""
		switch q := w.rng.Float64(); {
		case q < 0.03:
			// Large inputs, under the input limit: echoed by actions and
			// doubled by sets, they take the state to its limit.
			blob = bigBlobs[bigSizes[0]][:[]int{60_000, 100_000, 120_000}[w.rng.IntN(3)]]
			w.report.Faults["input_near_limit"]++
		case q < 0.2:
			blob = bigBlobs[bigSizes[0]][:w.rng.IntN(200)]
		}
		s.input = map[string]any{"n": int64(w.rng.IntN(1000)), "blob": blob}
		w.report.GeneratedSagas++
	case r == 0:
		s.plan, s.input = plans["transfer"], map[string]any{"amount": int64(w.rng.IntN(1000))}
	default:
		s.plan, s.input = plans["trip"], map[string]any{"cancel": w.rng.IntN(10) == 0}
	}
	sc := &script{spec: s, calls: map[string]*callScript{}, stubborn: map[string]bool{}, comp: map[string][]behaviour{}}
	var actions []string
	for _, st := range s.plan.Definition().Steps {
		if st.Kind != lang.KindAction {
			continue
		}
		actions = append(actions, st.ID)
		if len(st.Catch) > 0 && w.rng.IntN(10) == 0 {
			sc.stubborn[st.ID] = true
			w.report.Faults["step_failing_every_visit"]++
		}
		if st.Compensate != nil {
			sc.comp[st.ID] = w.pick(4, 0.08, 0, 0.03)
		}
	}
	if len(actions) > 0 && w.rng.IntN(25) == 0 {
		sc.cancelDuring = actions[w.rng.IntN(len(actions))]
	}
	if w.rng.IntN(25) == 0 {
		// A client cancels at a random time, between steps.
		w.queue.addOp(w.clock.Now().Add(time.Duration(w.rng.Int64N(int64(2*time.Minute)))), func(ctx context.Context) {
			w.report.Faults["cancel_between_steps"]++
			sc.cancels = append(sc.cancels, "between steps")
			w.cancel(ctx, s.id)
		})
	}
	w.actions.scripts[s.id] = sc
	w.earlySignals(s)
	return s
}

// pick draws the behaviour of the attempts of one call: mostly success,
// sometimes a few retryable failures first, sometimes every attempt fails,
// sometimes a permanent failure, sometimes a timeout after the effect.
func (w *world) pick(attempts int, permanent, exhausted, timeout float64) []behaviour {
	r := w.rng.Float64()
	switch {
	case r < permanent:
		return []behaviour{failPermanent}
	case r < permanent+exhausted:
		out := make([]behaviour, attempts)
		for i := range out {
			out[i] = failRetryable
		}
		return out
	case r < permanent+exhausted+timeout:
		return []behaviour{timeoutAfterEffect}
	case r < permanent+exhausted+timeout+0.01:
		// Unreachable through every attempt and through most or all of
		// the asks that find its outcome out (the default compensation
		// retry is 10): its saga parks until an operator resumes it.
		out := make([]behaviour, attempts+8+w.rng.IntN(4))
		for i := range out {
			out[i] = unreachable
		}
		return out
	case r < permanent+exhausted+timeout+0.16:
		out := make([]behaviour, 1+w.rng.IntN(max(1, attempts-1)))
		for i := range out {
			out[i] = failRetryable
		}
		if len(out) >= attempts {
			out = out[:attempts-1]
		}
		return out
	}
	return nil
}

// resumeParked plays the operator at the end of a run: every saga parked
// in compensation_failed is resumed, and a resume that reported an error
// is tried again (it may have been written but not sent). It reports
// whether it did anything.
func (w *world) resumeParked(ctx context.Context, sagas []*sagaSpec) bool {
	did := false
	for _, s := range sagas {
		acted, failed := w.resumeOne(ctx, s.id)
		if acted && !failed {
			w.report.Faults["operator_resume"]++
		}
		did = did || acted
	}
	return did
}

// resumeOne resumes a parked saga, or retries a resume that reported an
// error; acted says whether it tried, failed whether the try failed.
func (w *world) resumeOne(ctx context.Context, id string) (acted, failed bool) {
	if w.quarantined[id] {
		return false, false
	}
	st, err := w.coord.Get(ctx, id)
	if err != nil {
		return false, true
	}
	// A resume that failed is tried again while its write may have landed:
	// the saga compensating, or running a caught fork's undo.
	retry := w.resumeFailed[id] && (st.Status == durable.StatusCompensating || st.Status == durable.StatusRunning)
	if st.Status != durable.StatusCompensationFailed && !retry {
		delete(w.resumeFailed, id)
		return false, false
	}
	if !retry {
		w.actions.scripts[id].resumed++
	}
	w.bufs = append(w.bufs, &handleLog{})
	if n := len(st.Stack); !retry && n > 0 && st.Stack[n-1].OutDropped && st.CompensationError != nil && st.CompensationError.Type == lang.ErrorTypeExpression {
		// The compensation reads an output that could not be kept: as the
		// message says, the operator undoes the step by hand (in the
		// service, under the compensation's key) and resumes with skip.
		top := st.Stack[n-1]
		key := fmt.Sprintf("%s/%s.compensate/%d", id, st.CompensationError.Step, top.Seq)
		w.actions.applied[key], w.actions.succeeded[key] = true, true
		w.forks.noteApplied(key)
		_, err = w.coord.SkipCompensation(ctx, id)
		// The skip counts once its write landed: a skip that failed before
		// it is tried again, and must not be counted twice.
		landed := err == nil
		for try := 0; !landed && try < 20; try++ {
			if after, gerr := w.coord.Get(ctx, id); gerr == nil {
				landed = after.Version > st.Version
				break
			}
		}
		if landed {
			w.handUndone[id] = append(w.handUndone[id], key)
			w.report.Faults["operator_undo_by_hand"]++
		}
	} else {
		traced := debugTrace != "" && strings.HasPrefix(id, debugTrace)
		if traced {
			w.tracing++
			fmt.Printf("%s resume %s (retry %v)\n", w.clock.Now().Format("15:04:05.000"), id, retry)
		}
		_, err = w.coord.Resume(ctx, id)
		if traced {
			w.tracing--
			fmt.Printf("%s   resume -> %v\n", w.clock.Now().Format("15:04:05.000"), err)
		}
	}
	w.bufs = w.bufs[:len(w.bufs)-1]
	w.resumeFailed[id] = err != nil
	return true, err != nil
}

// scheduleResume plays an operator who resumes a parked saga long after
// it parked: hours to days later in virtual time, retrying a resume that
// failed a few minutes on.
func (w *world) scheduleResume(id string, delay time.Duration) {
	w.queue.addOp(w.clock.Now().Add(delay), func(ctx context.Context) {
		acted, failed := w.resumeOne(ctx, id)
		if failed {
			w.scheduleResume(id, time.Duration(1+w.rng.IntN(10))*time.Minute)
			return
		}
		if acted {
			w.report.Faults["late_resume"]++
		}
	})
}

// forkItems draws a foreach's list: empty a tenth of the time, mostly a
// few elements, sometimes up to 30.
func (w *world) forkItems() []any {
	n := 0
	switch q := w.rng.Float64(); {
	case q < 0.1:
	case q < 0.8:
		n = 1 + w.rng.IntN(6)
	default:
		n = 7 + w.rng.IntN(24)
	}
	out := make([]any, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

// forkPlanCount is how many definitions with forks a run generates.
func forkPlanCount(cfg Config) int {
	switch {
	case cfg.ForkDefinitions < 0:
		return 0
	case cfg.ForkDefinitions > 0:
		return cfg.ForkDefinitions
	}
	return max(10, cfg.Sagas/100)
}

// newChild makes the script of a child run at its first write: its plan
// is found by hash; its compensations fail as any saga's may, and now and
// then a client cancels it while one of its actions runs.
func (w *world) newChild(r *durable.SagaRecord) {
	plan := w.plans[r.DefinitionHash]
	if plan == nil || !strings.Contains(r.SagaID, ".") {
		return
	}
	// Generated (forkgen.go): its actions' outputs reach and pass the
	// limits as a generated saga's do (a branch's last out past them).
	s := &sagaSpec{id: r.SagaID, plan: plan, generated: true, maxVisits: genMaxVisits, child: true}
	sc := &script{spec: s, calls: map[string]*callScript{}, stubborn: map[string]bool{}, comp: map[string][]behaviour{}}
	var actions []string
	for _, st := range plan.Steps() {
		if st.Kind != lang.KindAction {
			continue
		}
		actions = append(actions, st.ID)
		if st.Compensate != nil {
			sc.comp[st.ID] = w.pick(4, 0.04, 0, 0.03)
		}
	}
	if len(actions) > 0 && w.rng.IntN(40) == 0 {
		sc.cancelDuring = actions[w.rng.IntN(len(actions))]
	}
	w.actions.scripts[s.id] = sc
	w.forks.children = append(w.forks.children, s)
}
