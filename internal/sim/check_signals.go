package sim

import (
	"slices"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// deadlineSlack is how long past its deadline a saga may still be
// running or waiting: the deadline's timer is a message (delayed, or the
// tick's, which runs every minute) that a crash may hide for a visibility
// timeout or a few, as any message.
const deadlineSlack = 15 * time.Minute

// checkDeliveries checks, over a saga's committed writes (kept ones too),
// the invariants of signals, callbacks and deadlines:
//
//   - signal_applied_once: a logical signal lands (applied or kept) in at
//     most one write; each transition completes as many awaits as it
//     consumes signals (the one it applied, and the kept ones it took), and
//     none is consumed twice (more awaits than signals is a violation;
//     fewer, signals lost);
//   - callback_applied_once: the completions of a token land in at most
//     one write, and only while the saga runs or waits on that very
//     attempt (never an earlier visit's or attempt's);
//   - deadline_kept: no write past the deadline and deadlineSlack leaves
//     the saga running or waiting (unless a cancel waits on its pending
//     action, or the deadline has stopped the fork the saga waits on: it
//     compensates once the children have ended), nor does the run end so.
//     (A write may come late when the queue is backlogged, as at 10,000
//     sagas on one virtual clock; when it comes, the deadline must be
//     acted on.)
//   - nothing_lost: a signal that landed is consumed, or still kept at the
//     end in a saga that ended; no await times out while a signal of its
//     name is kept.
func (w *world) checkDeliveries(s *sagaSpec, st *saga.State, writes []committedWrite) {
	r := w.report
	if len(writes) == 0 || writes[0].sum == nil {
		return
	}
	r.Checks["signal_applied_once"]++
	r.Checks["callback_applied_once"]++
	r.Checks["deadline_kept"]++
	r.Checks["nothing_lost"]++
	landed := map[string]int{}   // logical signal or token -> writes it landed in
	consumed := map[string]int{} // logical signal -> awaits that took it
	for i, wr := range writes {
		if wr.sum == nil {
			continue
		}
		var prev *summary
		if i > 0 {
			prev = writes[i-1].sum
		}
		tag := wr.log.delivery
		_, isSignal := w.signals[tag]
		if tag != "" {
			landed[tag]++
			if landed[tag] == 2 {
				inv := "callback_applied_once"
				if isSignal {
					inv = "signal_applied_once"
				}
				w.violate(inv, "saga %s (%s): %s landed in a second write, v%d", s.id, s.plan.Name(), tag, wr.version)
			}
			if !isSignal && prev != nil {
				if ref, err := saga.ParseCallbackToken(tag); err == nil && (!prev.has || prev.pending.Compensating ||
					prev.pending.Step != ref.Step || prev.pending.Seq != ref.Seq || prev.pending.Attempt != ref.Attempt) {
					w.violate("callback_applied_once", "saga %s (%s): v%d took the completion of step %d visit %d attempt %d, but the saga was at %+v",
						s.id, s.plan.Name(), wr.version, ref.Step, ref.Seq, ref.Attempt, prev.pending)
				}
			}
		}
		if !wr.kept && !wr.sum.deadline.IsZero() && !wr.sum.cancel && !wr.sum.forkStopped && (wr.status == durable.StatusRunning || wr.status == durable.StatusWaiting) &&
			wr.at.After(wr.sum.deadline.Add(deadlineSlack)) {
			w.violate("deadline_kept", "saga %s (%s): v%d, written at %s, leaves it %s past its deadline %s", s.id, s.plan.Name(), wr.version, wr.at, wr.status, wr.sum.deadline)
		}
		if wr.kept || prev == nil {
			continue
		}
		// What the transition consumed: the signal it applied, and the
		// kept signals it took.
		var took []string
		if isSignal {
			took = append(took, tag)
		}
		for _, k := range prev.kept {
			if !slices.ContainsFunc(wr.sum.kept, func(x keptSignal) bool { return x.id == k.id }) {
				took = append(took, k.id)
			}
		}
		awaits := 0
		for _, ev := range wr.events() {
			if ev.Kind != lang.KindAwait || ev.Compensation {
				continue
			}
			switch {
			case ev.Outcome == saga.OutcomeCompleted:
				awaits++
			case (ev.Outcome == saga.OutcomeFailed || ev.Outcome == saga.OutcomeCaught) && ev.Error != nil && ev.Error.Type == lang.ErrorTypeStateTooLarge:
				awaits++ // it took a signal whose payload could not be kept
			case (ev.Outcome == saga.OutcomeFailed || ev.Outcome == saga.OutcomeCaught) && ev.Error != nil && ev.Error.Type == lang.ErrorTypeTimeout:
				if step, _ := s.plan.Step(ev.Step); step != nil && step.Await != nil &&
					slices.ContainsFunc(prev.kept, func(x keptSignal) bool { return x.name == step.Await.Signal }) {
					w.violate("nothing_lost", "saga %s (%s): await %s timed out at v%d while a signal %s was kept", s.id, s.plan.Name(), ev.Step, wr.version, step.Await.Signal)
				}
			}
		}
		switch {
		case awaits > len(took):
			w.violate("signal_applied_once", "saga %s (%s): v%d completed %d awaits but consumed signals %v", s.id, s.plan.Name(), wr.version, awaits, took)
		case awaits < len(took):
			w.violate("nothing_lost", "saga %s (%s): v%d completed %d awaits, but signals %v left the saga", s.id, s.plan.Name(), wr.version, awaits, took)
		}
		for _, id := range took {
			if consumed[id]++; consumed[id] == 2 {
				w.violate("signal_applied_once", "saga %s (%s): signal %s consumed a second time at v%d", s.id, s.plan.Name(), id, wr.version)
			}
		}
	}
	last := writes[len(writes)-1].sum
	if last == nil {
		return
	}
	for id, n := range landed {
		if _, ok := w.signals[id]; !ok || n == 0 || consumed[id] > 0 {
			continue
		}
		if !slices.ContainsFunc(last.kept, func(x keptSignal) bool { return x.id == id }) {
			w.violate("nothing_lost", "saga %s (%s, %s): signal %s landed, was never consumed and is no longer kept", s.id, s.plan.Name(), st.Status, id)
		} else if !st.Status.Final() {
			w.violate("nothing_lost", "saga %s (%s): signal %s still kept at the end, and the saga is %s", s.id, s.plan.Name(), id, st.Status)
		}
	}
	if !last.deadline.IsZero() && (st.Status == durable.StatusRunning || st.Status == durable.StatusWaiting) && w.clock.Now().After(last.deadline.Add(deadlineSlack)) {
		w.violate("deadline_kept", "saga %s (%s): still %s at the end of the run, past its deadline %s", s.id, s.plan.Name(), st.Status, last.deadline)
	}
}
