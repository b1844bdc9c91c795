package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// genHold draws a generated definition's failure policy: a quarter hold
// (on_failure: hold), half of those with a hold_for shorter than any
// operator's answer, longer, or as long as the deadline.
func (w *world) genHold(deadline time.Duration) string {
	r := w.rng
	if r.IntN(4) != 0 {
		return ""
	}
	out := "on_failure: hold\n"
	if r.IntN(2) == 0 {
		d := []time.Duration{2 * time.Minute, 30 * time.Minute, 20 * time.Hour}[r.IntN(3)]
		if deadline > 0 && d > deadline {
			d = deadline
		}
		out += "hold_for: " + lang.FormatDuration(d) + "\n"
	}
	return out
}

// Operator verbs on a held saga.
const (
	verbRetry      = "retry"
	verbCompensate = "compensate"
	verbCancel     = "cancel"
)

// noteHeld takes a step event: the first of a transition that held its
// saga has an operator answer it later (retry, compensate or cancel),
// and now and then a second operator race the first with another verb.
func (w *world) noteHeld(ev engine.StepEvent) {
	if ev.Status != durable.StatusHeld {
		return
	}
	k := fmt.Sprintf("%s@%d", ev.SagaID, ev.Version)
	if w.held[k] {
		return
	}
	w.held[k] = true
	w.report.Faults["held"]++
	verbs := []string{verbRetry, verbRetry, verbCompensate, verbCancel}
	at := w.clock.Now().Add(time.Minute + time.Duration(w.rng.Int64N(int64(3*time.Hour))))
	first := verbs[w.rng.IntN(len(verbs))]
	w.queue.addOp(at, func(ctx context.Context) { w.operate(ctx, ev.SagaID, first) })
	if w.rng.IntN(4) == 0 {
		second := verbs[w.rng.IntN(len(verbs))]
		race := at.Add(time.Duration(w.rng.Int64N(int64(2 * time.Second))))
		w.queue.addOp(race, func(ctx context.Context) {
			w.report.Faults["held_verbs_race"]++
			w.operate(ctx, ev.SagaID, second)
		})
	}
}

// operate has an operator apply verb to a saga, trying again on errors
// (a crash of the operator's call) until it lands or no longer applies.
func (w *world) operate(ctx context.Context, sagaID, verb string) {
	prev := w.delivery
	w.delivery = nil
	defer func() { w.delivery = prev }()
	for range 20 {
		w.bufs = append(w.bufs, &handleLog{})
		var st *saga.State
		var err error
		switch verb {
		case verbRetry:
			st, err = w.coord.Retry(ctx, sagaID)
		case verbCompensate:
			st, err = w.coord.Compensate(ctx, sagaID)
		default:
			st, err = w.coord.Cancel(ctx, sagaID)
		}
		w.bufs = w.bufs[:len(w.bufs)-1]
		if err == nil {
			w.report.Faults["operator_"+verb]++
			w.operated[fmt.Sprintf("%s@%d", sagaID, st.Version)] = verb
			return
		}
		if errors.Is(err, saga.ErrInvalidEvent) || errors.Is(err, durable.ErrNotFound) {
			return
		}
	}
}

// releaseHeld is the operators' last round once faults stop: every saga
// still held is retried (its service works again) or compensated.
func (w *world) releaseHeld(ctx context.Context, sagas []*sagaSpec) bool {
	did := false
	for _, s := range sagas {
		st, err := w.coord.Get(ctx, s.id)
		if err != nil || st.Status != durable.StatusHeld {
			continue
		}
		verb := verbCompensate
		if w.rng.IntN(2) == 0 {
			verb = verbRetry
		}
		w.operate(ctx, s.id, verb)
		did = true
	}
	return did
}

// checkHolds checks what ended each hold of a saga: an operator's verb
// that landed on it, or its timer (hold_for or the deadline) no earlier
// than due; and that a retry runs the step it was held on.
func (w *world) checkHolds(s *sagaSpec, writes []committedWrite) {
	w.report.Checks["holds_kept"]++
	for i, wr := range writes {
		if wr.status != durable.StatusHeld || i+1 >= len(writes) {
			continue
		}
		next := writes[i+1]
		verb, byOperator := w.operated[fmt.Sprintf("%s@%d", s.id, next.version)]
		switch {
		case byOperator && verb == verbRetry && next.status != durable.StatusRunning:
			w.violate("holds_kept", "saga %s: v%d, a retry of its hold, is %s", s.id, next.version, next.status)
		case byOperator && verb != verbRetry && next.status != durable.StatusCompensating && next.status != durable.StatusCompensated:
			w.violate("holds_kept", "saga %s: v%d, a %s of its hold, is %s", s.id, next.version, verb, next.status)
		case !byOperator && next.cancelled:
			// A cancel not of the operators': a client's, or its fork's stop.
		case !byOperator && (wr.wakeAt.IsZero() || next.at.Before(wr.wakeAt)):
			w.violate("holds_kept", "saga %s: v%d ended its hold at %s, no operator's verb, its timer at %s", s.id, next.version, next.at, wr.wakeAt)
		case !byOperator && next.status != durable.StatusCompensating && next.status != durable.StatusCompensated:
			w.violate("holds_kept", "saga %s: v%d, its hold's end, is %s", s.id, next.version, next.status)
		}
	}
}
