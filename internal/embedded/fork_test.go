package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// effects records what actions did, in order; an action named in fail
// fails for good; one in slow sleeps first; running counts the calls in
// flight per step, and peak the most there were.
type effects struct {
	mu      sync.Mutex
	log     []string
	fail    map[string]bool
	slow    map[string]time.Duration
	running map[string]int
	peak    map[string]int
	applied map[string]bool // idempotency keys whose effect is in log
}

func newEffects() *effects {
	return &effects{fail: map[string]bool{}, slow: map[string]time.Duration{}, running: map[string]int{}, peak: map[string]int{}, applied: map[string]bool{}}
}

func (e *effects) registry() *engine.Registry {
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		e.mu.Lock()
		e.running[c.Step]++
		e.peak[c.Step] = max(e.peak[c.Step], e.running[c.Step])
		d := e.slow[c.Step]
		e.mu.Unlock()
		time.Sleep(d)
		e.mu.Lock()
		defer e.mu.Unlock()
		e.running[c.Step]--
		name := c.Action
		if arg, ok := c.Input.(map[string]any)["arg"]; ok {
			name += fmt.Sprintf("(%v)", arg)
		}
		if e.fail[name] {
			return nil, saga.Permanent(errors.New(name + " refused"))
		}
		if e.applied[c.IdempotencyKey] {
			// A service that honours the key applies the effect once: a
			// message delivered twice (at least once) may call it twice.
			return c.Input, nil
		}
		e.applied[c.IdempotencyKey] = true
		e.log = append(e.log, name)
		return c.Input, nil
	})
	return reg
}

func (e *effects) done() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.log)
}

func runFork(t *testing.T, e *effects, files map[string]string, input map[string]any, during func(rt *embedded.Runtime)) *saga.State {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, src := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	plan, err := saga.CompileFile(fsys, "main.yaml", saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := embedded.Start(embedded.Config{Actions: e.registry(), Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p", Input: input}); err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during(rt)
	}
	st, err := rt.Wait(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

const foreachYAML = `saga: ship
input: {items: list, note: string, big: string}
steps:
  - id: open
    action: orders.open
    with: {arg: open}
    out: order
    compensate: {action: orders.close, with: {arg: close}}
  - id: ship_all
    foreach: "${input.items}"
    as: sku
    concurrency: 3
    steps:
      - id: ship
        action: shipping.send
        with: {arg: "${sku}", at: "${index}", note: "${input.note}", order: "${vars.order.arg}"}
        out: parcel
        compensate: {action: shipping.recall, with: {arg: "${vars.parcel.arg}"}}
    out: parcels
`

// A foreach runs each element once, at most concurrency at a time, and
// its out lists the outputs in element order; each child holds only what
// its steps read of the parent (input.note and vars.order, not input.big).
func TestForeachRunsEachElementOnceWithinConcurrency(t *testing.T) {
	e := newEffects()
	e.slow["ship"] = 5 * time.Millisecond
	items := []any{}
	for i := range 12 {
		items = append(items, fmt.Sprintf("s%02d", i))
	}
	var child *saga.State
	st := runFork(t, e, map[string]string{"main.yaml": foreachYAML}, map[string]any{"items": items, "note": "n", "big": strings.Repeat("x", 4000)}, func(rt *embedded.Runtime) {})
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("%s %+v", st.Status, st.Failure)
	}
	out := st.Vars["parcels"].([]any)
	for i, o := range out {
		if o.(map[string]any)["arg"] != items[i] || o.(map[string]any)["at"] != int64(i) {
			t.Fatalf("output %d is %v", i, o)
		}
	}
	if e.peak["ship"] > 3 {
		t.Errorf("%d iterations ran at once, over concurrency 3", e.peak["ship"])
	}
	log := e.done()
	for _, it := range items {
		if n := count(log, fmt.Sprintf("shipping.send(%v)", it)); n != 1 {
			t.Errorf("%v shipped %d times", it, n)
		}
	}
	_ = child
}

func count(log []string, s string) int {
	n := 0
	for _, l := range log {
		if l == s {
			n++
		}
	}
	return n
}

// One element fails for good: no element starts after it (one lane: the
// elements run one after the other), the ones that shipped are recalled,
// each once, newest first, and then the step before the fork is undone.
func TestForeachFailureRecallsWhatShippedThenTheRest(t *testing.T) {
	e := newEffects()
	e.fail["shipping.send(s04)"] = true
	items := []any{}
	for i := range 12 {
		items = append(items, fmt.Sprintf("s%02d", i))
	}
	oneLane := strings.Replace(foreachYAML, "concurrency: 3", "concurrency: 1", 1)
	st := runFork(t, e, map[string]string{"main.yaml": oneLane}, map[string]any{"items": items, "note": "n", "big": "b"}, nil)
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Step != "ship" {
		t.Fatalf("%s %+v", st.Status, st.Failure)
	}
	want := []string{"orders.open(open)", "shipping.send(s00)", "shipping.send(s01)", "shipping.send(s02)", "shipping.send(s03)",
		"shipping.recall(s03)", "shipping.recall(s02)", "shipping.recall(s01)", "shipping.recall(s00)", "orders.close(close)"}
	if log := e.done(); !slices.Equal(log, want) {
		t.Fatalf("effects\n%v\nwant\n%v", log, want)
	}
}

// With lanes, every element that shipped is recalled once, before the step
// before the fork is undone.
func TestForeachFailureInLanes(t *testing.T) {
	e := newEffects()
	e.fail["shipping.send(s04)"] = true
	items := []any{}
	for i := range 12 {
		items = append(items, fmt.Sprintf("s%02d", i))
	}
	st := runFork(t, e, map[string]string{"main.yaml": foreachYAML}, map[string]any{"items": items, "note": "n", "big": "b"}, nil)
	if st.Status != durable.StatusCompensated {
		t.Fatalf("%s %+v", st.Status, st.Failure)
	}
	log := e.done()
	closeAt := slices.Index(log, "orders.close(close)")
	if closeAt != len(log)-1 {
		t.Fatalf("open not undone last: %v", log)
	}
	for _, l := range log {
		if sku, ok := strings.CutPrefix(l, "shipping.send("); ok {
			if n := count(log, "shipping.recall("+sku); n != 1 {
				t.Errorf("%s recalled %d times: %v", sku, n, log)
			}
		}
	}
	if slices.Contains(log, "shipping.send(s07)") || slices.Contains(log, "shipping.send(s10)") {
		t.Errorf("lane 1 went on after s04 failed: %v", log)
	}
}

// An empty list completes at once with an empty out.
func TestForeachOfNothing(t *testing.T) {
	e := newEffects()
	st := runFork(t, e, map[string]string{"main.yaml": foreachYAML}, map[string]any{"items": []any{}, "note": "n", "big": "b"}, nil)
	if st.Status != durable.StatusSucceeded || len(st.Vars["parcels"].([]any)) != 0 {
		t.Fatalf("%s %v", st.Status, st.Vars["parcels"])
	}
}

const parallelYAML = `saga: trip
steps:
  - id: book
    parallel:
      - steps:
          - {id: hotel, action: hotels.book, with: {arg: hotel}, out: h, compensate: {action: hotels.cancel, with: {arg: hotel}}}
      - steps:
          - {id: flight, action: flights.book, with: {arg: flight}, out: f, compensate: {action: flights.cancel, with: {arg: flight}}}
          - {id: seat, action: seats.pick, with: {arg: seat}, out: s, compensate: {action: seats.release, with: {arg: seat}}}
    out: booked
    catch: [{errors: [Error], next: sorry}]
  - id: done
    succeed: {output: "${vars.booked}"}
  - id: sorry
    succeed: {output: "${'sorry'}"}
`

// A branch that fails is caught on the fork step once every branch that
// completed steps is undone, newest first within it.
func TestParallelFailureIsCaughtAfterTheBranchesAreUndone(t *testing.T) {
	e := newEffects()
	e.fail["hotels.book(hotel)"] = true
	// The flight runs long past the hotel's failure, its count and the
	// branches' cancel (the race detector slows those tenfold): its
	// result finds its branch cancelled, and the seat never starts.
	e.slow["flight"] = time.Second
	st := runFork(t, e, map[string]string{"main.yaml": parallelYAML}, nil, nil)
	if st.Status != durable.StatusSucceeded || st.Output != "sorry" {
		t.Fatalf("%s %v %+v", st.Status, st.Output, st.Failure)
	}
	log := e.done()
	if slices.Contains(log, "seats.pick(seat)") {
		t.Errorf("seat started after the fork failed: %v", log)
	}
	if slices.Contains(log, "flights.book(flight)") && !slices.Contains(log, "flights.cancel(flight)") {
		t.Errorf("flight booked, not cancelled: %v", log)
	}
}

// Cancel while the branches run: the running actions finish, every branch
// is undone, and the saga ends compensated as cancelled.
func TestCancelWhileBranchesRun(t *testing.T) {
	e := newEffects()
	e.slow["hotel"], e.slow["flight"] = 50*time.Millisecond, 50*time.Millisecond
	st := runFork(t, e, map[string]string{"main.yaml": parallelYAML}, nil, func(rt *embedded.Runtime) {
		time.Sleep(10 * time.Millisecond)
		if _, err := rt.Coordinator.Cancel(context.Background(), "p"); err != nil {
			t.Errorf("cancel: %v", err)
		}
	})
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != "Cancelled" {
		t.Fatalf("%s %+v", st.Status, st.Failure)
	}
	log := e.done()
	for _, pair := range [][2]string{{"hotels.book(hotel)", "hotels.cancel(hotel)"}, {"flights.book(flight)", "flights.cancel(flight)"}, {"seats.pick(seat)", "seats.release(seat)"}} {
		if slices.Contains(log, pair[0]) != slices.Contains(log, pair[1]) {
			t.Errorf("%s without %s (or the reverse): %v", pair[0], pair[1], log)
		}
	}
}

const childYAML = `saga: order
steps:
  - {id: reserve, action: stock.reserve, with: {arg: reserve}, compensate: {action: stock.release, with: {arg: release}}}
  - id: pay
    saga: payment.yaml
    with: {amount: 12.5}
    out: receipt
  - {id: ship, action: shipping.send, with: {arg: ship}}
`

const paymentChildYAML = `saga: payment
input: {amount: double}
steps:
  - {id: charge, action: cards.charge, with: {arg: "${input.amount}"}, out: charge, compensate: {action: cards.refund, with: {arg: "${vars.charge.arg}"}}}
  - id: receipt
    succeed: {output: "${{'paid': vars.charge.arg}}"}
`

// A child saga's output is the step's out; when the parent fails later,
// the child is undone as a whole before the steps before it.
func TestChildSagaIsUndoneAsAWhole(t *testing.T) {
	e := newEffects()
	files := map[string]string{"main.yaml": childYAML, "payment.yaml": paymentChildYAML}
	st := runFork(t, e, files, nil, nil)
	if st.Status != durable.StatusSucceeded || st.Vars["receipt"].(map[string]any)["paid"] != 12.5 {
		t.Fatalf("%s %v", st.Status, st.Vars)
	}
	e = newEffects()
	e.fail["shipping.send(ship)"] = true
	st = runFork(t, e, files, nil, nil)
	if st.Status != durable.StatusCompensated {
		t.Fatalf("%s %+v", st.Status, st.Failure)
	}
	if log := e.done(); !slices.Equal(log, []string{"stock.reserve(reserve)", "cards.charge(12.5)", "cards.refund(12.5)", "stock.release(release)"}) {
		t.Fatalf("effects %v", log)
	}
}

// The saga's deadline passes while its children wait: they stop, what
// they did is undone, and the saga compensates, at the deadline.
func TestForkDeadlineInVirtualTime(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := durable.NewManualClock(start)
	e := newEffects()
	plan, err := saga.Compile("main.yaml", []byte(`saga: slow
timeout: 1h
steps:
  - {id: open, action: orders.open, with: {arg: open}, compensate: {action: orders.close, with: {arg: close}}}
  - id: each
    foreach: "${[1, 2, 3]}"
    concurrency: 2
    steps:
      - {id: mark, action: marks.set, with: {arg: "${item}"}, compensate: {action: marks.clear, with: {arg: "${item}"}}}
      - {id: cool, wait: {for: 50m}}
      - {id: more, wait: {for: 50m}}
`), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := embedded.Start(embedded.Config{Actions: e.registry(), Workers: 2, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := rt.Run(ctx, &engine.StartParams{Plan: plan, SagaID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != "SagaDeadlineExceeded" {
		t.Fatalf("%s %+v", st.Status, st.Failure)
	}
	if passed := clock.Now().Sub(start); passed < time.Hour || passed > time.Hour+time.Minute {
		t.Errorf("compensated after %s of virtual time, want the 1h deadline", passed)
	}
	log := e.done()
	if slices.Contains(log, "marks.set(3)") {
		t.Errorf("a third child started after the deadline: %v", log)
	}
	for _, m := range []string{"1", "2"} {
		if count(log, "marks.set("+m+")") != count(log, "marks.clear("+m+")") {
			t.Errorf("mark %s set and cleared unevenly: %v", m, log)
		}
	}
	if log[len(log)-1] != "orders.close(close)" {
		t.Errorf("open not undone last: %v", log)
	}
}

// Forks nest: a foreach in a branch, whose body's parallel sees the
// item; a branch that ends with succeed gives its output; vars a branch
// writes stay in it.
func TestNestedForks(t *testing.T) {
	e := newEffects()
	st := runFork(t, e, map[string]string{"main.yaml": `saga: nest
input: {orders: list}
steps:
  - {id: seed, set: {base: "${'b'}"}}
  - id: both
    parallel:
      - steps:
          - id: each
            foreach: "${input.orders}"
            as: order
            steps:
              - id: legs
                parallel:
                  - steps: [{id: pick, action: stock.pick, with: {arg: "${order + '-' + string(index)}"}, out: picked}]
                  - steps: [{id: label, action: labels.print, with: {arg: "${order}"}, out: label}]
                out: legs
            out: done
      - steps:
          - {id: local, set: {secret: "${vars.base + '!'}"}}
          - id: quick
            succeed: {output: "${vars.secret}"}
    out: results
`}, map[string]any{"orders": []any{"o1", "o2"}}, nil)
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("%s %+v", st.Status, st.Failure)
	}
	results := st.Vars["results"].([]any)
	each := results[0].([]any)
	if len(each) != 2 || results[1] != "b!" {
		t.Fatalf("results %v", results)
	}
	legs := each[1].([]any)
	if legs[0].(map[string]any)["arg"] != "o2-1" || legs[1].(map[string]any)["arg"] != "o2" {
		t.Fatalf("o2's legs %v", legs)
	}
	if _, leaked := st.Vars["secret"]; leaked {
		t.Errorf("a branch's var leaked into the parent: %v", st.Vars)
	}
}
