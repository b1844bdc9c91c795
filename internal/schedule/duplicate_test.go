package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/schedule"
)

// TestDuplicatedDeliveryStartsOnce: EventBridge Scheduler delivers a
// firing at least once. Each delivery of the request Request renders,
// started as the start queue starts a request (by its id, with its
// input), runs one saga per firing: the repeat finds the saga its id
// names and starts nothing; another firing starts another saga; the same
// id with another input is refused.
func TestDuplicatedDeliveryStartsOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string]int{} // idempotency key -> calls
	actions := engine.NewRegistry()
	actions.SetFallback(func(ctx context.Context, call saga.Call) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[call.IdempotencyKey]++
		return map[string]any{}, nil
	})
	rt, err := embedded.Start(embedded.Config{Actions: actions, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	plan, err := saga.Compile("report.yaml", []byte("saga: report\ninput: {region: string}\nsteps:\n  - id: build\n    action: report.build\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	input, err := schedule.Request("report", "report-", json.RawMessage(`{"region": "eu"}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := func(body string) (string, error) {
		var req startRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		_, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: plan, SagaID: req.Start.ID, Input: req.Start.Input})
		return req.Start.ID, err
	}
	monday := time.Date(2027, 1, 4, 8, 0, 0, 0, time.UTC)
	for _, firing := range []time.Time{monday, monday, monday.AddDate(0, 0, 1), monday} {
		id, err := start(deliver(input, firing))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if st, err := rt.Wait(ctx, id); err != nil || st.Status != durable.StatusSucceeded {
			t.Fatalf("%s: %v, %v", id, st, err)
		}
	}
	other, _ := schedule.Request("report", "report-", json.RawMessage(`{"region": "us"}`))
	if id, err := start(deliver(other, monday)); !errors.Is(err, durable.ErrExists) {
		t.Errorf("%s with another input: %v, want durable.ErrExists", id, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"report-2027-01-04T08:00:00Z/build/1": 1, "report-2027-01-05T08:00:00Z/build/1": 1}
	if len(calls) != len(want) || calls["report-2027-01-04T08:00:00Z/build/1"] != 1 || calls["report-2027-01-05T08:00:00Z/build/1"] != 1 {
		t.Errorf("action calls %v, want %v", calls, want)
	}
}
