package sim

import (
	"context"
	"fmt"

	"github.com/lambdasaga/lambdasaga/engine"
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

type plansByName map[string]*engine.Plan

func compilePlans() (plansByName, error) {
	out := plansByName{}
	for name, src := range map[string]string{"transfer": transferDef, "trip": tripDef} {
		p, err := engine.Compile(name+".yaml", []byte(src))
		if err != nil {
			return nil, err
		}
		out[name] = p
	}
	return out, nil
}

type sagaSpec struct {
	id    string
	plan  *engine.Plan
	input map[string]any
}

// newSaga picks a saga, its input and its script from the random source.
func (w *world) newSaga(i int, plans plansByName) sagaSpec {
	s := sagaSpec{id: fmt.Sprintf("s%d-%d", w.cfg.Seed, i)}
	if w.rng.IntN(2) == 0 {
		s.plan, s.input = plans["transfer"], map[string]any{"amount": int64(w.rng.IntN(1000))}
	} else {
		s.plan, s.input = plans["trip"], map[string]any{"cancel": w.rng.IntN(10) == 0}
	}
	sc := &script{forward: map[string][]behaviour{}, comp: map[string][]behaviour{}}
	for _, st := range s.plan.Definition().Steps {
		if st.Kind != engine.KindAction {
			continue
		}
		attempts := engine.DefaultRetry.Attempts
		if st.Retry != nil {
			attempts = st.Retry.Attempts
		}
		sc.forward[st.ID] = w.pick(attempts, 0.05, 0.03, 0.07)
		if st.Compensate != nil {
			sc.comp[st.ID] = w.pick(4, 0.08, 0, 0)
		}
	}
	w.actions.scripts[s.id] = sc
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
	case r < permanent+exhausted+timeout+0.15:
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

// resumeParked plays the operator: every saga parked in
// compensation_failed is resumed, and a resume that reported an error is
// tried again (it may have been written but not sent). It reports whether
// it did anything.
func (w *world) resumeParked(ctx context.Context, sagas []sagaSpec) bool {
	did := false
	for _, s := range sagas {
		st, err := w.coord.Get(ctx, s.id)
		if err != nil {
			continue
		}
		retry := w.resumeFailed[s.id] && st.Status == engine.StatusCompensating
		if st.Status != engine.StatusCompensationFailed && !retry {
			delete(w.resumeFailed, s.id)
			continue
		}
		if !retry {
			w.actions.scripts[s.id].resumed++
		}
		w.bufs = append(w.bufs, &handleLog{})
		_, err = w.coord.Resume(ctx, s.id)
		w.bufs = w.bufs[:len(w.bufs)-1]
		w.resumeFailed[s.id] = err != nil
		if err == nil {
			w.report.Faults["operator_resume"]++
		}
		did = true
	}
	return did
}
