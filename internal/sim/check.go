package sim

import (
	"time"

	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func (w *world) violate(invariant, format string, args ...any) {
	w.report.Violations[invariant]++
	if len(w.report.Examples) < maxExamples {
		w.report.Examples = append(w.report.Examples, invariant+": "+fmt.Sprintf(format, args...))
	}
}

// check verifies the invariants of the contract after the run.
func (w *world) check(ctx context.Context, sagas []*sagaSpec) {
	r := w.report
	for _, k := range []string{"no_saga_lost", "ends_final", "versions_written_once", "stable_idempotency_key", "effects_equal_committed_steps",
		"compensation_exact_reverse", "success_compensated", "visits_bounded", "dead_letters_only_poison", "status_since_kept", "timers_not_early",
		"signal_applied_once", "callback_applied_once", "deadline_kept", "nothing_lost", "holds_kept", "paused_not_run", "deferral_writes_nothing"} {
		r.Checks[k] += 0
		r.Violations[k] += 0
	}
	keysBySaga := map[string][]string{}
	for key, owner := range w.actions.owner {
		saga, _, _ := strings.Cut(owner, "/")
		keysBySaga[saga] = append(keysBySaga[saga], key)
	}
	dead := map[string]int{}
	for _, b := range w.queue.dlq {
		if msg, err := durable.DecodeMessage(b); err == nil {
			dead[msg.SagaID]++
		}
	}
	for _, s := range sagas {
		st, err := w.coord.Get(ctx, s.id)
		r.Checks["no_saga_lost"]++
		if err != nil {
			w.violate("no_saga_lost", "saga %s: %v", s.id, err)
			continue
		}
		if s.child {
			r.ChildOutcomes[st.Status]++
		} else {
			r.Outcomes[st.Status]++
		}
		// Every saga ends succeeded or compensated once faults stop and
		// operators have resumed what parked: none is left running,
		// compensating or parked with nothing queued.
		r.Checks["ends_final"]++
		if st.Status != durable.StatusSucceeded && st.Status != durable.StatusCompensated {
			parked := ""
			if st.CompensationError != nil {
				parked = ", parked on " + st.CompensationError.Error()
			}
			w.violate("ends_final", "saga %s (%s) ended %s at version %d (failure %s, %d messages in the dead-letter queue%s%s)",
				s.id, s.plan.Name(), st.Status, st.Version, w.failureType(s, st), dead[s.id], map[bool]string{true: ", dropped after looping past its visit bound"}[w.quarantined[s.id]], parked)
		}

		// Each version written once, in order, and the last one is the state
		// (a write that kept a delivery keeps the version).
		all := w.committed[s.id]
		w.checkDeliveries(s, st, all)
		var writes []committedWrite
		for _, wr := range all {
			if !wr.kept {
				writes = append(writes, wr)
			}
		}
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

		// What a store indexes changes only with the status (store/dynamo
		// writes no index entry otherwise): the creation time never, the
		// time the saga entered its status only when the status changes,
		// and then to the time of that write.
		r.Checks["status_since_kept"]++
		for i, wr := range writes {
			prev := wr
			if i > 0 {
				prev = writes[i-1]
			}
			switch {
			case !wr.createdAt.Equal(writes[0].createdAt):
				w.violate("status_since_kept", "saga %s: v%d changed the creation time", s.id, wr.version)
			case i == 0 && !wr.statusSince.Equal(wr.updatedAt):
				w.violate("status_since_kept", "saga %s: v%d started at %s but says since %s", s.id, wr.version, wr.updatedAt, wr.statusSince)
			case i > 0 && wr.status != prev.status && !wr.statusSince.Equal(laterOf(wr.updatedAt, prev.statusSince.Add(time.Nanosecond))):
				w.violate("status_since_kept", "saga %s: v%d entered %s at %s (since before: %s) but says since %s", s.id, wr.version, wr.status, wr.updatedAt, prev.statusSince, wr.statusSince)
			case i > 0 && wr.status == prev.status && !wr.statusSince.Equal(prev.statusSince):
				w.violate("status_since_kept", "saga %s: v%d kept %s but moved its since from %s to %s", s.id, wr.version, wr.status, prev.statusSince, wr.statusSince)
			default:
				continue
			}
			break
		}

		w.checkHolds(s, writes)

		// A timer fires no earlier than it is due: the write that ends a
		// wait (its step completes, or fails on the deadline) follows a
		// waiting write, and the store takes it at or after that write's
		// WakeAt by the simulation's clock; a waiting write has a timer,
		// and none in its past. (A saga waiting on its children has no
		// timer but its deadline: its join is a message.)
		r.Checks["timers_not_early"]++
		for i, wr := range writes {
			if wr.status == durable.StatusWaiting && !wr.forkWait && (wr.wakeAt.IsZero() || wr.wakeAt.Before(wr.at)) {
				w.violate("timers_not_early", "saga %s: v%d waits on timer %s, written at %s", s.id, wr.version, wr.wakeAt, wr.at)
				break
			}
			if i == 0 || writes[i-1].status != durable.StatusWaiting {
				continue
			}
			prev := writes[i-1]
			for _, ev := range wr.events() {
				if ev.Kind == lang.KindWait && (ev.Outcome == saga.OutcomeCompleted || ev.Outcome == saga.OutcomeFailed) && wr.at.Before(prev.wakeAt) {
					w.violate("timers_not_early", "saga %s: v%d ended wait %s at %s, before its timer at %s", s.id, wr.version, ev.Step, wr.at, prev.wakeAt)
				}
				break // only the transition's first event can be the timer's
			}
		}

		// What committed: the calls whose result a committed transition
		// recorded, the completed steps, and the compensations, with keys.
		recorded := map[string]bool{}
		// notRunPaused: uncompensated steps whose attempt a cancel or the
		// saga's deadline met while a pause held it (engine: paused):
		// written as not run, its outcome unknown, and, with nothing to
		// undo, never found out; an earlier delivery may have applied its
		// effect, which no transition records (docs/PROTOCOL.md, "Pauses").
		notRunPaused := map[string]bool{}
		var completedKeys, compKeys, successKeys []string
		seen := map[string]bool{}
		firstCall := map[string]int{}      // key -> the order of its first committed call
		lastCall := map[string]saga.Call{} // step -> its latest committed forward call
		for _, wr := range writes {
			for _, c := range wr.calls() {
				if _, ok := firstCall[c.IdempotencyKey]; !ok {
					firstCall[c.IdempotencyKey] = len(firstCall)
				}
				recorded[c.IdempotencyKey] = true
				if !c.Compensation {
					lastCall[c.Step] = c.Call
				}
				if c.ok && !c.Compensation && !seen[c.IdempotencyKey] {
					seen[c.IdempotencyKey] = true
					if step, _ := s.plan.Step(c.Step); step != nil && step.Compensate != nil {
						successKeys = append(successKeys, c.IdempotencyKey)
					}
				}
			}
			for _, ev := range wr.events() {
				if step, _ := s.plan.Step(ev.Step); ev.Outcome == saga.OutcomeFailed && !ev.Compensation && step != nil && step.Compensate == nil &&
					ev.Error != nil && strings.HasSuffix(ev.Error.Message, saga.PausedMayHaveRun) {
					notRunPaused[ev.Step] = true
				}
				call, ok := callFor(wr.calls(), ev.Step, ev.Compensation)
				if step, _ := s.plan.Step(ev.Step); !ok && !ev.Compensation && step != nil && step.Callback != nil {
					// A callback step completes when its token does, after
					// the write that recorded its action's success.
					call, ok = lastCall[ev.Step]
				}
				switch {
				case ev.Kind == lang.KindAction && !ev.Compensation && ev.Outcome == saga.OutcomeCompleted:
					if !ok {
						w.violate("effects_equal_committed_steps", "saga %s: step %s completed without a call in its transition", s.id, ev.Step)
						continue
					}
					completedKeys = append(completedKeys, call.IdempotencyKey)
				case lang.IsFork(ev.Kind):
					// A fork's transitions call nothing: its children do.
				case ev.Compensation && ev.Outcome == saga.OutcomeCompensated:
					if !ok {
						w.violate("effects_equal_committed_steps", "saga %s: step %s compensated without a call in its transition", s.id, ev.Step)
						continue
					}
					compKeys = append(compKeys, call.IdempotencyKey)
				case ev.Compensation && ev.Outcome == saga.OutcomeSkipped:
					// Resumed with skip: the operator undid it by hand.
					if undone := w.handUndone[s.id]; len(undone) > 0 {
						compKeys = append(compKeys, undone[0])
						w.handUndone[s.id] = undone[1:]
					} else {
						w.violate("compensation_exact_reverse", "saga %s: compensation of %s skipped, but no operator undid it", s.id, ev.Step)
					}
				}
			}
		}
		// Every effect applied (deduplicated by key) was recorded by a
		// committed transition, once; every committed completion and
		// compensation had its effect applied.
		r.Checks["effects_equal_committed_steps"]++
		for _, key := range keysBySaga[s.id] {
			if n := w.actions.duplicates[key]; n > 0 {
				w.violate("effects_equal_committed_steps", "saga %s: effect of %s applied %d times", s.id, key, n+1)
			}
			if w.actions.applied[key] && !recorded[key] && notRunPaused[strings.Split(key, "/")[1]] {
				r.Faults["effect_unrecorded_while_paused"]++
				continue
			}
			if w.actions.applied[key] && !recorded[key] {
				w.violate("effects_equal_committed_steps", "saga %s (%s, %s, failure %s): effect of %s applied, but no committed transition recorded its call", s.id, s.plan.Name(), st.Status, w.failureType(s, st), key)
			}
		}
		for _, key := range append(slices.Clone(completedKeys), compKeys...) {
			if !w.actions.applied[key] {
				w.violate("effects_equal_committed_steps", "saga %s: %s committed as done, but its effect was never applied", s.id, key)
			}
		}
		// A failed saga undid exactly the compensable calls whose success
		// it recorded, newest first (by their visits: a success found out
		// while compensating stands where its step's visit was); a
		// succeeded one undid nothing.
		slices.SortStableFunc(successKeys, func(a, b string) int { return firstCall[a] - firstCall[b] })
		r.Checks["compensation_exact_reverse"]++
		want := []string{}
		if st.Status == durable.StatusCompensated {
			for _, k := range slices.Backward(successKeys) {
				want = append(want, compensationKey(k))
			}
		}
		if compKeys == nil {
			compKeys = []string{}
		}
		if !slices.Equal(compKeys, want) {
			w.violate("compensation_exact_reverse", "saga %s (%s, %s, failure %s): compensable successes %v, compensations %v", s.id, s.plan.Name(), st.Status, w.failureType(s, st), successKeys, compKeys)
		}
		// The services' view: every action that took effect is
		// compensated when its saga ends compensated, whatever happened
		// after it (its result too large or deep to keep, a cancel while
		// it ran, the deadline), and whether it returned success or ran
		// into its deadline after its effect (reported as a Timeout: the
		// engine finds that out under its key when it compensates).
		r.Checks["success_compensated"]++
		if st.Status == durable.StatusCompensated {
			for _, key := range sorted(keysBySaga[s.id]) {
				if w.actions.compKey[key] || !w.actions.applied[key] {
					continue
				}
				step, _ := s.plan.Step(strings.TrimPrefix(w.actions.owner[key], s.id+"/"))
				if step == nil || step.Compensate == nil {
					continue
				}
				if !w.actions.applied[compensationKey(key)] {
					how := "returned success"
					if !w.actions.succeeded[key] {
						how = "took effect (reported as a Timeout)"
					}
					w.violate("success_compensated", "saga %s (%s, compensated, failure %s): %s %s and was never compensated", s.id, s.plan.Name(), w.failureType(s, st), key, how)
				}
			}
		}
		// Loops end: no saga makes more action visits than its plan allows.
		r.Checks["visits_bounded"]++
		if n := w.actions.visits[s.id]; n > s.maxVisits {
			w.violate("visits_bounded", "saga %s (%s, %s, failure %s) made %d action visits, over its bound of %d", s.id, s.plan.Name(), st.Status, w.failureType(s, st), n, s.maxVisits)
		}
	}
	// The dead-letter queue holds exactly the poison messages, byte for byte.
	r.Checks["dead_letters_only_poison"]++
	if !sameBodies(w.queue.dlq, w.queue.poison) {
		w.violate("dead_letters_only_poison", "dead-letter queue holds %d messages, %d poison injected (sagas: %v; why: %s)", len(w.queue.dlq), len(w.queue.poison), sorted(mapKeys(dead)), w.deadLetterReasons())
	}
}

// deadLetterReasons says, for each message in the dead-letter queue that
// is not an injected poison message, what it was (saga, kind, version)
// and what its receipts ended with, in order, repeats counted.
func (w *world) deadLetterReasons() string {
	poison := map[string]bool{}
	for _, b := range w.queue.poison {
		poison[string(b)] = true
	}
	var out []string
	for _, d := range w.queue.dead {
		if poison[string(d.body)] {
			continue
		}
		msg, err := durable.DecodeMessage(d.body)
		if err != nil {
			out = append(out, fmt.Sprintf("undecodable %q: %s", d.body, compactErrors(d.errs)))
			continue
		}
		kind := string(msg.Kind)
		if kind == "" {
			kind = "step " + msg.Step
		}
		if msg.Kind == durable.KindLaunch || msg.Child != 0 {
			kind += fmt.Sprintf(" child %d", msg.Child)
		}
		out = append(out, fmt.Sprintf("%s v%d %s (%s, attempt %d): %s", msg.SagaID, msg.Version, kind, msg.Queue, msg.Attempt, compactErrors(d.errs)))
	}
	return strings.Join(out, "; ")
}

// compactErrors lists what receipts ended with, runs of one error as
// "N x error".
func compactErrors(errs []string) string {
	var parts []string
	for i := 0; i < len(errs); {
		j := i
		for j < len(errs) && errs[j] == errs[i] {
			j++
		}
		if j-i > 1 {
			parts = append(parts, fmt.Sprintf("%d x %s", j-i, errs[i]))
		} else {
			parts = append(parts, errs[i])
		}
		i = j
	}
	return "[" + strings.Join(parts, " | ") + "]"
}

// compensationKey is the idempotency key of the compensation of the
// visit whose forward key is key: saga/step/seq -> saga/step.compensate/seq.
func compensationKey(key string) string {
	i := strings.LastIndexByte(key, '/')
	return key[:i] + ".compensate" + key[i:]
}

func (w *world) failureType(s *sagaSpec, st *saga.State) string {
	t := failureType(st)
	if cs := w.actions.scripts[s.id].cancels; len(cs) > 0 && t == lang.ErrorTypeCancelled {
		t += " " + strings.Join(cs, ", then ")
	}
	return t
}

func failureType(st *saga.State) string {
	if st.Failure == nil {
		return "none"
	}
	if len(st.Failure.Type) > 40 {
		return fmt.Sprintf("a type of %d bytes", len(st.Failure.Type))
	}
	return st.Failure.Type
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func callFor(calls []loggedCall, step string, comp bool) (saga.Call, bool) {
	for _, c := range calls {
		if c.Step == step && c.Compensation == comp {
			return c.Call, true
		}
	}
	return saga.Call{}, false
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

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// maxExamples is how many violations a report spells out.
var maxExamples = 10
