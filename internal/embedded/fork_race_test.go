package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Races of a fork on the embedded runtime (4 workers a queue):
// cancels against children ending and failing, failures at once. Each run
// checks that the saga ends, that every effect a compensated saga made is
// undone once, and that a succeeded one undid nothing.

// ledger records effects once per idempotency key (a service that honours
// the key), by run; an action named in fail fails for good; each sleeps a
// random while first.
type ledger struct {
	mu   sync.Mutex
	seen map[string]any
	log  map[string][]string // by run
	fail map[string]bool     // "action(arg)"
}

func newLedger() *ledger {
	return &ledger{seen: map[string]any{}, log: map[string][]string{}, fail: map[string]bool{}}
}

func (l *ledger) registry() *engine.Registry {
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		in, _ := c.Input.(map[string]any)
		run, _ := in["run"].(string)
		name := fmt.Sprintf("%s(%v)", c.Action, in["arg"])
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		l.mu.Lock()
		defer l.mu.Unlock()
		if out, ok := l.seen[c.IdempotencyKey]; ok {
			return out, nil
		}
		if l.fail[name] {
			return nil, saga.Permanent(errors.New(name + " refused"))
		}
		l.seen[c.IdempotencyKey] = c.Input
		l.log[run] = append(l.log[run], name)
		return c.Input, nil
	})
	return reg
}

func (l *ledger) effects(run string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.log[run]...)
}

const raceYAML = `saga: race
input: {run: string, items: list}
steps:
  - {id: open, action: o.open, with: {run: "${input.run}", arg: open}, compensate: {action: o.close, with: {run: "${input.run}", arg: open}}}
  - id: fan
    parallel:
      - steps: [{id: a, action: x.book, with: {run: "${input.run}", arg: a}, compensate: {action: x.cancel, with: {run: "${input.run}", arg: a}}}]
      - steps: [{id: b, action: x.book, with: {run: "${input.run}", arg: b}, compensate: {action: x.cancel, with: {run: "${input.run}", arg: b}}}]
      - steps:
          - {id: c, action: x.book, with: {run: "${input.run}", arg: c}, compensate: {action: x.cancel, with: {run: "${input.run}", arg: c}}}
          - {id: c2, action: x.book, with: {run: "${input.run}", arg: c2}, compensate: {action: x.cancel, with: {run: "${input.run}", arg: c2}}}
  - id: each
    foreach: "${input.items}"
    concurrency: 2
    steps:
      - {id: e, action: x.book, with: {run: "${input.run}", arg: "${item}"}, compensate: {action: x.cancel, with: {run: "${input.run}", arg: "${item}"}}}
  - {id: last, action: o.last, with: {run: "${input.run}", arg: last}}
`

// checkRun: every x.book(k) has exactly one x.cancel(k) if the saga
// compensated, none if it succeeded; o.open is closed likewise.
func checkRun(t *testing.T, run string, st *saga.State, log []string) {
	t.Helper()
	booked := map[string]int{}
	cancelled := map[string]int{}
	for _, e := range log {
		if k, ok := strings.CutPrefix(e, "x.book("); ok {
			booked[k]++
		}
		if k, ok := strings.CutPrefix(e, "x.cancel("); ok {
			cancelled[k]++
		}
		if e == "o.open(open)" {
			booked["open)"]++
		}
		if e == "o.close(open)" {
			cancelled["open)"]++
		}
	}
	switch st.Status {
	case durable.StatusSucceeded:
		if len(cancelled) > 0 {
			t.Errorf("%s succeeded and undid %v: %v", run, cancelled, log)
		}
	case durable.StatusCompensated:
		for k, n := range booked {
			if cancelled[k] != n {
				t.Errorf("%s compensated: %s booked %d, undone %d: %v", run, k, n, cancelled[k], log)
			}
		}
		for k := range cancelled {
			if booked[k] == 0 {
				t.Errorf("%s: %s undone, never done: %v", run, k, log)
			}
		}
	default:
		t.Errorf("%s ended %s %+v", run, st.Status, st.Failure)
	}
}

func startRace(t *testing.T, l *ledger) (*embedded.Runtime, *saga.Plan) {
	t.Helper()
	plan, err := saga.Compile("race.yaml", []byte(raceYAML), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := embedded.Start(embedded.Config{Actions: l.registry(), Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt, plan
}

// A cancel of the parent at a random moment: while the fork's children
// run, as the last of them ends, while the join runs, after it.
func TestCancelRacesTheFork(t *testing.T) {
	l := newLedger()
	rt, plan := startRace(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			run := fmt.Sprintf("r%02d", i)
			items := []any{run + "-i0", run + "-i1", run + "-i2"}
			if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: plan, SagaID: run, Input: map[string]any{"run": run, "items": items}}); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Duration(rand.IntN(30000)) * time.Microsecond)
			if _, err := rt.Coordinator.Cancel(ctx, run); err != nil && !errors.Is(err, saga.ErrInvalidEvent) {
				t.Errorf("%s: cancel: %v", run, err)
			}
			st, err := rt.Wait(ctx, run)
			if err != nil {
				got, _ := rt.Coordinator.Get(context.Background(), run)
				t.Errorf("%s never ended: %v (%s)", run, err, got.Status)
				return
			}
			checkRun(t, run, st, l.effects(run))
		})
	}
	wg.Wait()
}

// Two branches fail at once, or a branch fails as the parent is
// cancelled: the fork records one failure, every child ends, what
// succeeded is undone once.
func TestForkFailuresAtOnce(t *testing.T) {
	l := newLedger()
	rt, plan := startRace(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			run := fmt.Sprintf("f%02d", i)
			l.mu.Lock()
			l.fail[fmt.Sprintf("x.book(%s)", []string{"a", "b", "c2"}[i%3])] = true // shared across runs: a, b and c2 all fail
			l.mu.Unlock()
			items := []any{run + "-i0", run + "-i1"}
			if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: plan, SagaID: run, Input: map[string]any{"run": run, "items": items}}); err != nil {
				t.Error(err)
				return
			}
			if i%2 == 0 {
				time.Sleep(time.Duration(rand.IntN(10000)) * time.Microsecond)
				if _, err := rt.Coordinator.Cancel(ctx, run); err != nil && !errors.Is(err, saga.ErrInvalidEvent) {
					t.Errorf("%s: cancel: %v", run, err)
				}
			}
			st, err := rt.Wait(ctx, run)
			if err != nil {
				t.Errorf("%s never ended: %v", run, err)
				return
			}
			if st.Status != durable.StatusCompensated {
				t.Errorf("%s: %s, want compensated", run, st.Status)
			}
			checkRun(t, run, st, l.effects(run))
		})
	}
	wg.Wait()
}
