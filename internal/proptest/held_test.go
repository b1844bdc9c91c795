package proptest

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

// formatsTime's second action formats a var holding a time: the text shows
// the time's location, which the codec reads back as UTC.
const formatsTime = `saga: held
steps:
  - id: first
    action: svc.first
  - id: stamp
    set: {t: "${timestamp('2024-01-01T00:00:00+02:00')}"}
  - id: second
    action: svc.second
    with: {t: "${string(vars.t)}"}
`

// startAt starts plan and returns its state pending at its first action.
func startAt(t *testing.T, plan *saga.Plan) *saga.State {
	t.Helper()
	st := &saga.State{}
	if err := plan.Advance(st, saga.Event{Kind: saga.EventStart, SagaID: "held-1", Input: map[string]any{}, Now: heldEpoch}); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSameContinuationReportsATimeInAnotherLocation: a held time the
// codec reads back in UTC, which the next action's input formats, is
// reported at the call, with both texts.
func TestSameContinuationReportsATimeInAnotherLocation(t *testing.T) {
	plan, err := saga.Compile("held.yaml", []byte(formatsTime), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	held := startAt(t, plan)
	// The second action pending, and vars.t put back at +02:00 by hand:
	// what the set step before it left in memory until expression
	// results were made UTC.
	if err := plan.Advance(held, saga.Event{Kind: saga.EventResult, Now: heldEpoch, Output: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if cur, _ := held.Pending(); plan.Definition().Steps[cur.Step].ID != "second" {
		t.Fatalf("pending at step %d, want second", cur.Step)
	}
	held.Vars["t"] = time.Date(2024, 1, 1, 0, 0, 0, 0, time.FixedZone("EET", 2*3600))
	read := sagatest.ReadBack(t, held)

	what, detail := sameContinuation(plan, held, read, []time.Time{heldEpoch})
	if what != "Call" || !strings.Contains(detail, "Call.Input[t]") || !strings.Contains(detail, "+02:00") || !strings.Contains(detail, "Z") {
		t.Fatalf("got %q: %s; want the call's input t to differ, +02:00 against Z", what, detail)
	}
	if d := diffState(held, read); !strings.Contains(d, "State.Vars[t]") {
		t.Errorf("diffState: %q, want it at State.Vars[t]", d)
	}

	// The same instant in UTC: nothing differs.
	held.Vars["t"] = held.Vars["t"].(time.Time).UTC()
	if what, detail := sameContinuation(plan, held, sagatest.ReadBack(t, held), []time.Time{heldEpoch}); what != "" {
		t.Fatalf("a held state equal to its read: %s differs: %s", what, detail)
	}
}

// TestActionOutputLeavesHeldAsRead: an output holding a time in another
// location with a monotonic reading (time.Now() in a Go action) and nil
// bytes is stored as a read gives it (saga.CheckValue), so the action
// after it gets the same input from the held state as from a read.
func TestActionOutputLeavesHeldAsRead(t *testing.T) {
	plan, err := saga.Compile("held.yaml", []byte(`saga: held
steps:
  - id: first
    action: svc.first
    out: r
  - id: second
    action: svc.second
    with: {r: "${vars.r}", at: "${string(vars.r.at)}"}
`), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	held := startAt(t, plan)
	out := map[string]any{"at": time.Now().In(time.FixedZone("EET", 2*3600)), "b": []byte(nil)}
	if err := plan.Advance(held, saga.Event{Kind: saga.EventResult, Now: heldEpoch, Output: out}); err != nil {
		t.Fatal(err)
	}
	read := sagatest.ReadBack(t, held)
	if what, detail := sameContinuation(plan, held, read, []time.Time{heldEpoch}); what != "" {
		t.Errorf("%s differs: %s", what, detail)
	}
	if d := diffState(held, read); d != "" {
		t.Errorf("held and read differ at %s", d)
	}
}

func TestDeepCopyKeepsWhatAnEncodingLoses(t *testing.T) {
	at := time.Now().In(time.FixedZone("EET", 2*3600)) // a monotonic reading, and a location
	vars := map[string]any{"at": at, "none": []any(nil), "empty": []any{}, "n": 3}
	st := &saga.State{Vars: vars, Output: vars, History: make([]byte, 2, 64)}
	cp := deepCopy(st)
	if d := diffState(st, cp); d != "" {
		t.Fatalf("the copy differs: %s", d)
	}
	if got := cp.Vars["at"].(time.Time); got.String() != at.String() || got.Location() != at.Location() {
		t.Errorf("time %s copied as %s", at, got)
	}
	if _, isInt := cp.Vars["n"].(int); !isInt {
		t.Errorf("an int copied as a %T", cp.Vars["n"])
	}
	if cap(cp.History) != 64 {
		t.Errorf("History's capacity %d, want 64", cap(cp.History))
	}
	cp.Vars["x"] = 1
	if _, ok := st.Vars["x"]; ok {
		t.Fatal("a write to the copy's vars reached the original")
	}
	if out := cp.Output.(map[string]any); out["x"] != 1 {
		t.Error("the copy's output is no longer its vars map")
	}
}

// TestChainedStepsHoldWhatAReadGives runs formatsTime on the coordinator:
// the second action is chained after the first, from the state the chain
// holds, whose vars.t the set step between them wrote.
func TestChainedStepsHoldWhatAReadGives(t *testing.T) {
	plan, err := saga.Compile("held.yaml", []byte(formatsTime), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	clock := durable.NewManualClock(heldEpoch)
	store := memstore.New()
	q := memqueue.New(memqueue.Config{Clock: clock})
	plans := engine.NewPlans(store, saga.Options{})
	plans.Add(plan)
	res := &Result{}
	held := &heldCheck{store: store, byHash: map[string]*saga.Plan{plan.Hash(): plan}, clock: clock, res: res}
	var inputs []any
	acts := engine.NewRegistry()
	acts.SetFallback(func(_ context.Context, c saga.Call) (any, error) {
		inputs = append(inputs, c.Input)
		return map[string]any{}, nil
	})
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: store, Plans: plans, Queue: q, Actions: acts, Clock: clock,
		NewID: func() string { return "held-1" }, BeforeChained: held.before})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, Input: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		ds, err := q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if _, err := coord.Handle(ctx, d.Body); err != nil {
				t.Fatal(err)
			}
			if err := q.Delete(ctx, &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st, err := coord.Get(ctx, "held-1"); err != nil || st.Status != durable.StatusSucceeded {
		t.Fatalf("saga: %v, %v; want it succeeded", st, err)
	}
	if res.Chained != 1 {
		t.Fatalf("%d chained steps checked, want 1 (the second action)", res.Chained)
	}
	for _, v := range res.Violations {
		t.Errorf("%s\n  %s", v.Class, v.Detail)
	}
	if want := map[string]any{"t": "2023-12-31T22:00:00Z"}; len(inputs) != 2 || !reflect.DeepEqual(inputs[1], want) {
		t.Errorf("the actions got %v; want the second %v: the time as a read gives it", inputs, want)
	}
}
