package chaos_test

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/chaos"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// An operator's verbs on a held saga.
const (
	verbRetry      = "retry"
	verbCompensate = "compensate"
	verbCancel     = "cancel"
	// hold ends by itself: chaos-held.yaml's hold_for passes, and its
	// timer compensates. Found in a saga's history, never sent.
	verbTimer = "timer"
)

// holdScripts is what the operator does to a held saga, taken in turn:
// one verb; two verbs at once, from two goroutines; or nothing, and
// hold_for compensates.
var holdScripts = [][]string{
	{verbRetry}, {verbCompensate}, {verbCancel},
	{verbRetry, verbCancel}, {verbCompensate, verbCancel}, {verbRetry, verbCompensate},
	nil,
}

// heldSteps are chaos-held.yaml's steps, in order; heldStep is the one
// that fails until it is fixed, heldIndex its index in the plan.
var heldSteps = []string{"a", "b", "h", "d"}

const (
	heldStep  = "h"
	heldIndex = 2
)

// heldCount is how many held sagas run beside nSagas others: enough that
// each script runs at least twice, few enough that make chaos stays
// within seconds of its time (they all end within hold_for, 15 s, of
// their start, while the fork sagas still run).
func heldCount(nSagas int) int {
	return max(2*len(holdScripts), nSagas/7)
}

// heldRun is one saga of chaos-held.yaml and what its operator did.
type heldRun struct {
	id    string
	verbs []string
	// drop: the single verb's first call goes through the dropping
	// client (written, never sent: the sweep sends it), then again
	// through the client, as an operator who retries the command.
	drop bool
	// stagger delays one of two raced verbs (late): with none, the two
	// writes leave together and which lands first is a coin the
	// scheduler tosses; a few milliseconds let the first land and the
	// second meet what it left (a cancel meeting the retried step
	// running, a compensate meeting the saga running again).
	stagger time.Duration
	late    int

	// Set by its operator's goroutine, read once it is done.
	started      bool
	held         bool
	answers      map[string][]string // verb -> "ok", "refused" or "error: ..."
	acted, ended time.Time
	final        *saga.State
}

// holds runs the held sagas and their operators.
type holds struct {
	cl, dropper *client.Client
	tokenDir    string
	def         []byte
	runs        []*heldRun
	mu          sync.Mutex // guards each run's answers
	left        atomic.Int64
	wg          sync.WaitGroup
}

// startHolds starts n sagas of chaos-held.yaml, paced over about ten
// seconds as the others are, each with an operator that waits for it to
// be held and then acts by its script, and follows it until it is final
// or until the deadline.
func startHolds(ctx context.Context, t *testing.T, cl, dropper *client.Client, tokenDir string, seed uint64, n int, deadline time.Time) *holds {
	def, err := os.ReadFile("chaos-held.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := &holds{cl: cl, dropper: dropper, tokenDir: tokenDir, def: def}
	rng := mrand.New(mrand.NewPCG(seed, 17))
	for i, k := range rng.Perm(n) {
		r := &heldRun{id: fmt.Sprintf("chaosh-%d", i), verbs: holdScripts[k%len(holdScripts)], answers: map[string][]string{}}
		r.drop = len(r.verbs) == 1 && rng.IntN(3) == 0
		if len(r.verbs) == 2 && rng.IntN(2) == 0 {
			r.stagger, r.late = time.Duration(1+rng.IntN(40))*time.Millisecond, rng.IntN(2)
		}
		h.runs = append(h.runs, r)
	}
	h.left.Store(int64(n))
	h.wg.Add(n)
	go func() {
		for _, r := range h.runs {
			_, err := cl.Start(ctx, client.StartParams{File: "chaos-held.yaml", Definition: def, SagaID: r.id})
			if err != nil {
				t.Errorf("start %s: %v", r.id, err)
				h.left.Add(-1)
				h.wg.Done()
				continue
			}
			r.started = true
			go h.operate(ctx, r, deadline)
			time.Sleep(10 * time.Second / time.Duration(n))
		}
	}()
	return h
}

// running is how many held sagas are not final yet (or not given up on).
func (h *holds) running() int { return int(h.left.Load()) }

// wait returns once every operator is done.
func (h *holds) wait() { h.wg.Wait() }

// operate waits for r's saga to be held, fixes h (what an operator
// deploys before acting), sends the verbs (two
// at once when raced), then follows the saga until it is final.
func (h *holds) operate(ctx context.Context, r *heldRun, deadline time.Time) {
	defer h.wg.Done()
	defer h.left.Add(-1)
	// Polled every quarter second: no faster, as every read is one more
	// request to the emulator all the functions share; hold_for leaves
	// the operator fifteen seconds to act.
	for ; time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(250 * time.Millisecond) {
		st, err := h.cl.Status(ctx, r.id)
		if err != nil {
			continue
		}
		if st.Status == durable.StatusHeld {
			r.held = true
			break
		}
		if st.Status.Final() {
			r.final, r.ended = st, time.Now()
			return // never held: the check says so
		}
	}
	// The operator fixes h before any verb, the timer's scripts too: a
	// hold on an attempt that ran into its deadline (a loaded machine)
	// leaves h's outcome unknown, and compensating finds it out by
	// running h again under its key, which a service still broken
	// refuses for as long as the compensation's retries last (minutes).
	if err := chaos.Fix(h.tokenDir, r.id, heldStep); err != nil {
		h.note(r, verbRetry, err)
		return
	}
	r.acted = time.Now()
	switch len(r.verbs) {
	case 1:
		h.send(ctx, r, r.verbs[0], r.drop)
	case 2:
		// Both goroutines are ready before either sends, so that the two
		// writes race: which lands first is the store's to decide, and
		// the check reads it from the saga's history.
		var ready, done sync.WaitGroup
		gate := make(chan struct{})
		for i, v := range r.verbs {
			ready.Add(1)
			done.Go(func() {
				ready.Done()
				<-gate
				if i == r.late {
					time.Sleep(r.stagger)
				}
				h.send(ctx, r, v, false)
			})
		}
		ready.Wait()
		close(gate)
		done.Wait()
	}
	for ; time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(500 * time.Millisecond) {
		if st, err := h.cl.Status(ctx, r.id); err == nil && st.Status.Final() {
			r.final, r.ended = st, time.Now()
			return
		}
	}
}

// send sends one verb: first through the dropping client when drop (then
// again, later), retried after errors until an answer.
func (h *holds) send(ctx context.Context, r *heldRun, verb string, drop bool) {
	call := func(c *client.Client) error {
		var err error
		switch verb {
		case verbRetry:
			_, err = c.Retry(ctx, r.id)
		case verbCompensate:
			_, err = c.Compensate(ctx, r.id)
		case verbCancel:
			_, err = c.Cancel(ctx, r.id)
		}
		return err
	}
	if drop {
		h.note(r, verb, call(h.dropper))
		time.Sleep(time.Duration(500+mrand.IntN(1000)) * time.Millisecond)
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := call(h.cl)
		h.note(r, verb, err)
		if err == nil || errors.Is(err, saga.ErrInvalidEvent) || time.Now().After(end) || ctx.Err() != nil {
			return
		}
	}
}

func (h *holds) note(r *heldRun, verb string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		r.answers[verb] = append(r.answers[verb], "ok")
	case errors.Is(err, saga.ErrInvalidEvent):
		r.answers[verb] = append(r.answers[verb], "refused")
	default:
		r.answers[verb] = append(r.answers[verb], "error: "+err.Error())
	}
}

// heldHistory is what a held saga's history says: the operator's verbs
// that were written (and the timer that ended the hold), by how many
// transitions each opened; the attempt the saga was held at; the attempt
// the retry started; and the failed attempts that were retried.
type heldHistory struct {
	written      map[string]int
	heldAt       int
	unknown      bool // the attempt held on ran into its deadline: its outcome is found out if the saga compensates
	retryStarted int
	retrying     int
	retriedAfter int // h's attempts that failed and were retried after the hold
}

func readHeldHistory(st *saga.State) (heldHistory, bool) {
	hh := heldHistory{written: map[string]int{}}
	if st.HistoryDropped > 0 {
		return hh, false
	}
	es, err := st.HistoryEntries(nil)
	if err != nil {
		return hh, false
	}
	ended := false // the hold: entries after it are the retry's, or compensating's
	for _, e := range es {
		switch {
		case e.Opens && (e.Cause == saga.EventRetry || e.Cause == saga.EventCompensate || e.Cause == saga.EventCancel):
			hh.written[e.Cause.String()]++
			ended = true
		case e.Opens && e.Cause == saga.EventTimer && e.Status == durable.StatusCompensating:
			hh.written[verbTimer]++
			ended = true
		}
		if e.StepIndex != heldIndex || e.Compensation {
			continue
		}
		switch {
		case e.Cause == saga.EventRetry && e.Outcome == saga.OutcomeStarted:
			hh.retryStarted = e.Attempt
		case ended && e.Outcome == saga.OutcomeRetrying:
			hh.retriedAfter++
		case ended:
		case e.Outcome == saga.OutcomeRetrying:
			hh.retrying++
		case e.Outcome == saga.OutcomeFailed:
			hh.heldAt = e.Attempt
			hh.unknown = e.Error != nil && e.Error.Type == lang.ErrorTypeTimeout
		}
	}
	return hh, true
}

// check holds the held sagas to the contract, against their final states,
// their histories and the ledger.
//
// held_sagas_end: every saga was held, then ended succeeded or
// compensated (none left held, running or compensating).
// held_verbs_answered_as_written: a verb is written at most once; one the
// operator was told landed is in the history, or another verb it is the
// same as (a cancel or a compensate of a saga already compensating) is;
// one written was not refused; the hold ended by a verb or its timer.
// held_outcome_follows_the_winner: a retry not followed by a cancel
// succeeds; a cancel that landed compensates as cancelled (before or
// after a retry); a compensate or the timer compensates for the failure
// held on.
// held_effects_undone_iff_compensated: each step's effect at most once
// (one key), every effect found out; a saga that succeeded undid nothing
// and did every step; one that compensated undid every effect exactly
// once, newest first, each after it was done; h has no effect unless a
// retry was written.
// held_retry_same_key_attempts_go_on: h's refusals and its effect are
// under one key; its refused attempts are those before the hold, its
// effect's attempts those of the fresh budget after it, and the retry
// started the attempt after the one held on.
// held_versions_written_once: the start, a and b, each of h's failed
// attempts, each verb written (or the timer), each step's return after
// the hold, each compensation: one version each.
func (h *holds) check(ctx context.Context, ledger map[string][]chaos.Entry, violate func(inv, format string, args ...any), checked map[string]int) {
	for _, r := range h.runs {
		if !r.started {
			continue
		}
		st := r.final
		checked["held_sagas_end"]++
		describe := func() string {
			h.mu.Lock()
			defer h.mu.Unlock()
			line := "unread"
			if st == nil || !st.Status.Final() {
				// Where it is now, for a saga that did not end.
				if now, err := h.cl.Status(ctx, r.id); err == nil {
					st = now
				}
			}
			if st != nil {
				line = fmt.Sprintf("%s v%d (%v); history %s", st.Status, st.Version, st.Failure, historyLine(st))
			}
			return fmt.Sprintf("saga %s (verbs %v, drop %v, answers %v): %s", r.id, r.verbs, r.drop, r.answers, line)
		}
		switch {
		case !r.held:
			violate("held_sagas_end", "%s: never seen held", describe())
			continue
		case st == nil || st.Status != durable.StatusSucceeded && st.Status != durable.StatusCompensated:
			violate("held_sagas_end", "%s: did not end succeeded or compensated", describe())
			continue
		}
		hh, ok := readHeldHistory(st)
		if !ok {
			violate("held_verbs_answered_as_written", "%s: its history is unreadable or dropped entries", describe())
			continue
		}
		h.mu.Lock()
		answers := r.answers
		h.mu.Unlock()
		said := func(verb, answer string) bool {
			return slices.ContainsFunc(answers[verb], func(a string) bool { return strings.HasPrefix(a, answer) })
		}

		checked["held_verbs_answered_as_written"]++
		for _, v := range []string{verbRetry, verbCompensate, verbCancel} {
			n := hh.written[v]
			switch {
			case n > 1:
				violate("held_verbs_answered_as_written", "%s: %s written %d times", describe(), v, n)
			case n > 0 && !slices.Contains(r.verbs, v):
				violate("held_verbs_answered_as_written", "%s: %s written, never sent", describe(), v)
			case n == 1 && !said(v, "ok") && !said(v, "error"):
				violate("held_verbs_answered_as_written", "%s: %s written and refused", describe(), v)
			case n == 0 && said(v, "ok"):
				// A cancel or a compensate of a saga the other already
				// compensates is answered yes, and writes nothing.
				if v == verbRetry || hh.written[verbCancel]+hh.written[verbCompensate] == 0 {
					violate("held_verbs_answered_as_written", "%s: %s answered ok, never written", describe(), v)
				}
			}
		}
		ended := hh.written[verbRetry] + hh.written[verbCompensate] + hh.written[verbTimer]
		if hh.written[verbRetry] == 0 {
			ended += hh.written[verbCancel]
		}
		if ended != 1 {
			violate("held_verbs_answered_as_written", "%s: the hold ended %d times, want once", describe(), ended)
		}

		checked["held_outcome_follows_the_winner"]++
		want, wantType := durable.StatusCompensated, "Unavailable"
		switch {
		case hh.written[verbCancel] == 1:
			wantType = lang.ErrorTypeCancelled
		case hh.written[verbRetry] == 1:
			want = durable.StatusSucceeded
		}
		gotType := ""
		if st.Failure != nil {
			gotType = st.Failure.Type
		}
		if st.Status != want || want == durable.StatusCompensated && gotType != wantType {
			violate("held_outcome_follows_the_winner", "%s: ended %s (%s), want %s (%s)", describe(), st.Status, gotType, want, wantType)
		}

		var dos, undos, refused []chaos.Entry
		for _, e := range ledger[r.id] {
			switch e.Phase {
			case "do":
				dos = append(dos, e)
			case "undo":
				undos = append(undos, e)
			case "refused":
				refused = append(refused, e)
			}
		}
		bySeq := func(es []chaos.Entry) {
			sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
		}
		bySeq(dos)
		bySeq(undos)

		checked["held_effects_undone_iff_compensated"]++
		done := stepsOf(dos)
		wantUndo := slices.Clone(done)
		slices.Reverse(wantUndo)
		succeeded := st.Status == durable.StatusSucceeded
		retried := hh.written[verbRetry] == 1
		switch {
		case succeeded && !slices.Equal(done, heldSteps):
			violate("held_effects_undone_iff_compensated", "%s: succeeded with effects %v, want %v", describe(), done, heldSteps)
		case succeeded && len(undos) > 0:
			violate("held_effects_undone_iff_compensated", "%s: succeeded and undid %v", describe(), stepsOf(undos))
		case !retried && !slices.Equal(done, heldSteps[:heldIndex]) && !(hh.unknown && slices.Equal(done, heldSteps[:heldIndex+1])):
			// Without a retry h has no effect, unless the attempt held on
			// ran into its deadline: compensating found it out (ran h
			// again under its key), and it is undone with the rest.
			violate("held_effects_undone_iff_compensated", "%s: no retry written, effects %v, want %v", describe(), done, heldSteps[:heldIndex])
		case len(done) < heldIndex || !slices.Equal(done, heldSteps[:len(done)]):
			violate("held_effects_undone_iff_compensated", "%s: effects %v, want a prefix of %v through %s", describe(), done, heldSteps, heldSteps[heldIndex-1])
		case !succeeded && !slices.Equal(stepsOf(undos), wantUndo):
			violate("held_effects_undone_iff_compensated", "%s: compensations %v, want %v: each effect once, newest first", describe(), stepsOf(undos), wantUndo)
		}
		for _, e := range dos {
			if !e.Returned {
				violate("held_effects_undone_iff_compensated", "%s: the effect of %s was never found out (no call under its key returned)", describe(), e.Step)
			}
			for _, u := range undos {
				if u.Step == e.Step && u.Seq < e.Seq {
					violate("held_effects_undone_iff_compensated", "%s: %s undone before it was done", describe(), e.Step)
				}
			}
		}

		checked["held_retry_same_key_attempts_go_on"]++
		var hDo []chaos.Entry
		for _, e := range dos {
			if e.Step == heldStep {
				hDo = append(hDo, e)
			}
		}
		switch {
		case len(refused) != 1 || refused[0].Step != heldStep:
			violate("held_retry_same_key_attempts_go_on", "%s: refusals %+v, want those of %s under one key", describe(), refused, heldStep)
		case hh.heldAt < 1 || slices.ContainsFunc(refused[0].Attempts, func(a int) bool { return a < 1 || a > hh.heldAt }):
			violate("held_retry_same_key_attempts_go_on", "%s: refused attempts %v, held at attempt %d", describe(), refused[0].Attempts, hh.heldAt)
		case retried && hh.retryStarted != hh.heldAt+1:
			violate("held_retry_same_key_attempts_go_on", "%s: the retry started attempt %d, held at %d", describe(), hh.retryStarted, hh.heldAt)
		case len(hDo) == 1 && hDo[0].Key != refused[0].Key:
			violate("held_retry_same_key_attempts_go_on", "%s: %s refused under key %s, done under %s", describe(), heldStep, refused[0].Key, hDo[0].Key)
		case len(hDo) == 1 && slices.ContainsFunc(hDo[0].Attempts, func(a int) bool { return a <= hh.heldAt || a > 2*hh.heldAt }):
			// chaos-held.yaml's retry policy: attempts: 2, the budget
			// afresh after the hold.
			violate("held_retry_same_key_attempts_go_on", "%s: %s done by attempts %v, want the fresh budget after attempt %d", describe(), heldStep, hDo[0].Attempts, hh.heldAt)
		}

		// Every failed attempt of h before the hold but the last wrote a
		// retry; an attempt retried after the hold (a timeout on a slow
		// machine, a transient error), or found out as the saga
		// compensated, is not the script's to count.
		if n, ok := timedOutAndRetried(st); !ok || n > 0 || hh.unknown || hh.retriedAfter > 0 || hh.retrying != hh.heldAt-1 {
			checked["held_versions_unknown"]++
			continue
		}
		checked["held_versions_written_once"]++
		verbs := hh.written[verbRetry] + hh.written[verbCompensate] + hh.written[verbCancel] + hh.written[verbTimer]
		after := 0
		for _, e := range dos {
			if slices.Index(heldSteps, e.Step) >= heldIndex {
				after++
			}
		}
		if want := uint64(1 + heldIndex + hh.heldAt + verbs + after + len(undos)); st.Version != want {
			violate("held_versions_written_once", "%s: at version %d, want %d", describe(), st.Version, want)
		}
	}
}

// holdInvariants are the held sagas' invariants, for the report.
var holdInvariants = []string{"held_sagas_end", "held_verbs_answered_as_written", "held_outcome_follows_the_winner", "held_effects_undone_iff_compensated", "held_retry_same_key_attempts_go_on", "held_versions_written_once"}

// report logs what the held sagas met: the scripts, who won each race,
// and the kills while operators acted.
func (h *holds) report(t *testing.T, killed *killTimes) {
	outcomes := map[string]int{}
	var spans [][2]time.Time
	n := 0
	for _, r := range h.runs {
		if !r.started {
			continue
		}
		n++
		if !r.acted.IsZero() && !r.ended.IsZero() {
			spans = append(spans, [2]time.Time{r.acted, r.ended})
		}
		script := strings.Join(r.verbs, " vs ")
		if script == "" {
			script = "hold_for"
		}
		if r.drop {
			script += " (dropped once)"
		}
		if r.stagger > 0 {
			script += fmt.Sprintf(" (%s late)", r.verbs[r.late])
		}
		won := "unfinished"
		if r.final != nil {
			hh, _ := readHeldHistory(r.final)
			var ws []string
			for _, v := range []string{verbRetry, verbCompensate, verbCancel, verbTimer} {
				if hh.written[v] > 0 {
					ws = append(ws, v)
				}
			}
			won = strings.Join(ws, "+") + " written, " + string(r.final.Status)
		}
		outcomes[script+": "+won]++
	}
	keys := make([]string, 0, len(outcomes))
	for k := range outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "; %s x%d", k, outcomes[k])
	}
	t.Logf("holds: %d sagas held, %d kills while operators acted on them%s", n, killed.during(spans), b.String())
}
