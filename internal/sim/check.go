package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/lambdasaga/lambdasaga/engine"
)

func (w *world) violate(invariant, format string, args ...any) {
	w.report.Violations[invariant]++
	if len(w.report.Examples) < 10 {
		w.report.Examples = append(w.report.Examples, invariant+": "+fmt.Sprintf(format, args...))
	}
}

// check verifies the invariants of the contract after the run.
func (w *world) check(ctx context.Context, sagas []sagaSpec) {
	r := w.report
	for _, k := range []string{"no_saga_lost", "versions_written_once", "stable_idempotency_key", "effects_equal_committed_steps", "compensation_exact_reverse", "dead_letters_only_poison"} {
		r.Checks[k] += 0
		r.Violations[k] += 0
	}
	keysBySaga := map[string][]string{}
	for key, owner := range w.actions.owner {
		saga, _, _ := strings.Cut(owner, "/")
		keysBySaga[saga] = append(keysBySaga[saga], key)
	}
	for _, s := range sagas {
		st, err := w.coord.Get(ctx, s.id)
		r.Checks["no_saga_lost"]++
		if err != nil {
			w.violate("no_saga_lost", "saga %s: %v", s.id, err)
			continue
		}
		r.Outcomes[st.Status]++
		if st.Status != engine.StatusSucceeded && st.Status != engine.StatusCompensated {
			w.violate("no_saga_lost", "saga %s ended %s at version %d", s.id, st.Status, st.Version)
		}

		// Each version written once, in order, and the last one is the state.
		writes := w.committed[s.id]
		r.Checks["versions_written_once"]++
		for i, wr := range writes {
			if wr.version != uint64(i+1) {
				w.violate("versions_written_once", "saga %s: write %d is version %d (fork or regression)", s.id, i+1, wr.version)
				break
			}
		}
		if len(writes) > 0 && writes[len(writes)-1].version != st.Version {
			w.violate("versions_written_once", "saga %s: last write v%d, stored v%d", s.id, writes[len(writes)-1].version, st.Version)
		}

		// What committed: completed action steps (with their key) and compensations.
		var completedKeys, compensable, compensated, compKeys []string
		for _, wr := range writes {
			for _, ev := range wr.log.events {
				call, ok := callFor(wr.log.calls, ev.Step, ev.Compensation)
				switch {
				case ev.Kind == engine.KindAction && !ev.Compensation && ev.Outcome == engine.OutcomeCompleted:
					if !ok {
						w.violate("effects_equal_committed_steps", "saga %s: step %s completed without a call in its transition", s.id, ev.Step)
						continue
					}
					completedKeys = append(completedKeys, call.IdempotencyKey)
					if step, _ := s.plan.Step(ev.Step); step.Compensate != nil {
						compensable = append(compensable, ev.Step)
					}
				case ev.Compensation && ev.Outcome == engine.OutcomeCompensated:
					compensated = append(compensated, ev.Step)
					if ok {
						compKeys = append(compKeys, call.IdempotencyKey)
					}
				}
			}
		}
		// Applied effects, deduplicated by key, equal the committed steps.
		r.Checks["effects_equal_committed_steps"]++
		var appliedFwd, appliedComp []string
		for _, key := range keysBySaga[s.id] {
			if !w.actions.applied[key] {
				continue
			}
			if w.actions.compKey[key] {
				appliedComp = append(appliedComp, key)
			} else {
				appliedFwd = append(appliedFwd, key)
			}
		}
		for _, key := range append(appliedFwd, appliedComp...) {
			if n := w.actions.duplicates[key]; n > 0 {
				w.violate("effects_equal_committed_steps", "saga %s: effect of %s applied %d times", s.id, key, n+1)
			}
		}
		if !sameSet(appliedFwd, completedKeys) {
			w.violate("effects_equal_committed_steps", "saga %s: effects applied for %v, steps committed for %v", s.id, sorted(appliedFwd), sorted(completedKeys))
		}
		if !sameSet(appliedComp, compKeys) {
			w.violate("effects_equal_committed_steps", "saga %s: compensation effects %v, compensations committed %v", s.id, sorted(appliedComp), sorted(compKeys))
		}
		// A failed saga undid exactly its completed compensable steps, newest first.
		r.Checks["compensation_exact_reverse"]++
		want := []string{}
		if st.Status == engine.StatusCompensated {
			want = slices.Clone(compensable)
			slices.Reverse(want)
		}
		if compensated == nil {
			compensated = []string{}
		}
		if !slices.Equal(compensated, want) {
			w.violate("compensation_exact_reverse", "saga %s (%s): completed %v, compensated %v", s.id, st.Status, compensable, compensated)
		}
	}
	// The dead-letter queue holds exactly the poison messages, byte for byte.
	r.Checks["dead_letters_only_poison"]++
	if !sameBodies(w.queue.dlq, w.queue.poison) {
		w.violate("dead_letters_only_poison", "dead-letter queue holds %d messages, %d poison injected", len(w.queue.dlq), len(w.queue.poison))
	}
}

func callFor(calls []engine.Call, step string, comp bool) (engine.Call, bool) {
	for _, c := range calls {
		if c.Step == step && c.Compensation == comp {
			return c, true
		}
	}
	return engine.Call{}, false
}

func sorted(xs []string) []string { s := slices.Clone(xs); slices.Sort(s); return s }

func sameSet(a, b []string) bool { return slices.Equal(sorted(a), sorted(b)) }

func sameBodies(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	as, bs := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		as[i], bs[i] = string(a[i]), string(b[i])
	}
	return sameSet(as, bs)
}
