package chaos_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/chaos"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// The pause phase: while the sagas run and workers are killed, an
// operator pauses ledger.do (every forward step of chaos.yaml) for
// pauseFor, then unpauses it: every worker has seen the pause, and the
// attempts started before it have ended, for the last 5 seconds of it. The pause has an end a little after the
// unpause, so that the deferred messages come back by then rather than a
// whole engine.PausePoll later: the test ends as soon as ever.
const (
	pauseAfter = 3 * time.Second
	pauseFor   = 15 * time.Second
)

// pauseWindow is when ledger.do was paused, as the operator saw it.
type pauseWindow struct {
	mu                sync.Mutex
	paused, unpaused  time.Time
	pauseErr, lastErr error
}

// pausePhase pauses and unpauses ledger.do through op, an operator's
// client; it returns when it has unpaused.
func pausePhase(ctx context.Context, op *client.Client, w *pauseWindow) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(pauseAfter):
	}
	at := time.Now()
	err := op.Pause(ctx, &engine.PauseParams{Kind: durable.PauseAction, Target: "ledger.do", Until: at.Add(pauseFor + 2*time.Second)})
	w.mu.Lock()
	w.paused, w.pauseErr = at, err
	w.mu.Unlock()
	if err != nil {
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(pauseFor):
	}
	err = op.Unpause(context.WithoutCancel(ctx), durable.PauseAction, "ledger.do")
	w.mu.Lock()
	w.unpaused, w.lastErr = time.Now(), err
	w.mu.Unlock()
}

// checkPaused checks that no forward effect was first applied while the
// pause held: from when every worker must have seen it (engine.PauseTTL
// after it, plus a function timeout for an attempt that started before
// it) to the unpause.
func checkPaused(t *testing.T, w *pauseWindow, entries map[string][]chaos.Entry, checked map[string]int, violate func(inv, format string, args ...any)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pauseErr != nil || w.lastErr != nil {
		violate("paused_not_run", "pause %v, unpause %v", w.pauseErr, w.lastErr)
		return
	}
	if w.paused.IsZero() || w.unpaused.IsZero() {
		violate("paused_not_run", "the pause phase did not run (paused %v, unpaused %v)", w.paused, w.unpaused)
		return
	}
	from, to := w.paused.Add(engine.PauseTTL+functionTimeout+time.Second), w.unpaused
	if !from.Before(to) {
		violate("paused_not_run", "the pause held from %s to %s: no time to check", from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
	}
	held, after := 0, 0
	for _, e := range allEntries(entries) {
		if e.Phase != "do" {
			continue
		}
		checked["paused_not_run"]++
		if !e.At.Before(to) && e.At.Before(to.Add(5*time.Second)) {
			after++ // most of them held, and let go by the unpause
		}
		if !e.At.Before(from) && e.At.Before(to) {
			held++
			violate("paused_not_run", "saga %s step %s applied at %s, while ledger.do was paused (%s to %s)", e.Saga, e.Step, e.At.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))
		}
	}
	t.Logf("pause: ledger.do paused %s, held from %s to the unpause (%s); %d effects applied in it, %d in the 5 s after the unpause",
		w.paused.Format(time.TimeOnly), from.Format(time.TimeOnly), to.Format(time.TimeOnly), held, after)
}

func allEntries(by map[string][]chaos.Entry) []chaos.Entry {
	var all []chaos.Entry
	for _, es := range by {
		all = append(all, es...)
	}
	return all
}
