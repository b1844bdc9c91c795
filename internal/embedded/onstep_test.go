package embedded_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Wait returns a final saga only once OnStep has heard every step of it,
// the last included: a caller that reports from OnStep (sagactl run
// does) must not miss the last compensation because the worker that
// wrote it had not yet handed its events over.
func TestWaitReturnsAfterOnStepHeardTheEnd(t *testing.T) {
	actions := engine.NewRegistry()
	actions.SetFallback(func(ctx context.Context, call saga.Call) (any, error) {
		return map[string]any{"id": "x", "status": "declined"}, nil // check fails: compensate
	})
	var (
		mu    sync.Mutex
		heard []string
	)
	onStep := func(ev engine.StepEvent) {
		if ev.Compensation && ev.Step == "reserve" && ev.Outcome != saga.OutcomeStarted {
			time.Sleep(100 * time.Millisecond) // a slow listener on the saga's last transition
		}
		mu.Lock()
		defer mu.Unlock()
		if ev.Compensation && ev.Outcome != saga.OutcomeStarted && ev.Outcome != saga.OutcomeRetrying {
			heard = append(heard, ev.Step+":"+string(ev.Outcome))
		}
	}
	rt, err := embedded.Start(embedded.Config{Actions: actions, OnStep: onStep})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := rt.Run(ctx, &engine.StartParams{Plan: compile(t, "order.yaml"), SagaID: "o-1", Input: map[string]any{"order_id": "o-1", "amount": 10.0, "items": []any{"a"}}})
	if err != nil || st.Status != durable.StatusCompensated {
		t.Fatalf("%v %v", st, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) == 0 || heard[len(heard)-1] != "reserve:compensated" {
		t.Fatalf("Wait returned before OnStep heard the last compensation: heard %v", heard)
	}
}
