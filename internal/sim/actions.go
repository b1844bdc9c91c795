package sim

import (
	"context"
	"fmt"
	"strings"

	"github.com/lambdasaga/lambdasaga/engine"
)

// behaviour is what an action does on an attempt.
type behaviour uint8

const (
	succeed behaviour = iota
	failRetryable
	failPermanent
	timeoutAfterEffect // applies its effect, then reports a timeout
)

// script decides, per saga, how each action and compensation behaves.
type script struct {
	// forward[step] lists the behaviour of attempts 1, 2, ...; past the
	// list, attempts succeed.
	forward map[string][]behaviour
	// comp[step] likewise for compensations before any resume; after a
	// resume, compensations succeed.
	comp    map[string][]behaviour
	resumed int
}

// simActions is every action of the simulated services. Services honour
// idempotency keys: an effect applies once per key, and a call with a key
// whose effect applied returns the same success.
type simActions struct {
	w       *world
	scripts map[string]*script
	applied map[string]bool   // key -> effect applied
	owner   map[string]string // key -> saga/step(/compensate): a key belongs to one visit of one step
	compKey map[string]bool   // keys of compensation calls
	// duplicates counts effects applied more than once for one key (only
	// when sabotaged: honest services never do).
	duplicates map[string]int
}

func newSimActions(w *world) *simActions {
	return &simActions{w: w, scripts: map[string]*script{}, applied: map[string]bool{}, owner: map[string]string{}, compKey: map[string]bool{}, duplicates: map[string]int{}}
}

func (a *simActions) Invoke(_ context.Context, call engine.Call) (any, error) {
	top := a.w.top()
	top.calls = append(top.calls, call)
	w := a.w
	w.report.Checks["stable_idempotency_key"]++
	owner := call.SagaID + "/" + call.Step
	if call.Compensation {
		owner += "/compensate"
		a.compKey[call.IdempotencyKey] = true
	}
	if call.IdempotencyKey == "" || !strings.HasPrefix(call.IdempotencyKey, call.SagaID+"/") {
		w.violate("stable_idempotency_key", "call %s attempt %d has key %q", owner, call.Attempt, call.IdempotencyKey)
	} else if prev, ok := a.owner[call.IdempotencyKey]; ok && prev != owner {
		w.violate("stable_idempotency_key", "key %q used by %s and %s", call.IdempotencyKey, prev, owner)
	}
	a.owner[call.IdempotencyKey] = owner
	if a.applied[call.IdempotencyKey] && w.cfg.Sabotage != "ignore-idempotency-keys" {
		return map[string]any{"id": call.IdempotencyKey, "replayed": true}, nil
	}
	if a.applied[call.IdempotencyKey] {
		a.duplicates[call.IdempotencyKey]++ // the sabotaged service applies the effect again
	}
	sc := a.scripts[call.SagaID]
	list := sc.forward[call.Step]
	if call.Compensation {
		list = sc.comp[call.Step]
		if sc.resumed > 0 {
			list = nil
		}
	}
	b := succeed
	if call.Attempt-1 < len(list) {
		b = list[call.Attempt-1]
	}
	switch b {
	case failRetryable:
		return nil, fmt.Errorf("%s: service unavailable", call.Action)
	case failPermanent:
		return nil, engine.Permanent(engine.NewError("Rejected", call.Action+" rejected"))
	case timeoutAfterEffect:
		a.applied[call.IdempotencyKey] = true
		w.report.Faults["timeout_after_effect"]++
		return nil, engine.NewError(engine.ErrorTypeTimeout, call.Action+" timed out after doing its work")
	}
	a.applied[call.IdempotencyKey] = true
	return map[string]any{"id": call.IdempotencyKey}, nil
}
