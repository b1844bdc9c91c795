package embedded_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func compile(t *testing.T, file string) *saga.Plan {
	t.Helper()
	src, err := os.ReadFile("../saga/testdata/valid/" + file)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := saga.Compile(file, src, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// On a manual clock, a saga awaiting a signal holds virtual time until
// someone waits for it to end: a test sees it waiting and signals it; a
// test that waits instead sees the 72-hour timeout pass at once.
func TestAwaitInVirtualTime(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := durable.NewManualClock(start)
	actions := engine.NewRegistry()
	actions.SetFallback(func(ctx context.Context, call saga.Call) (any, error) {
		return map[string]any{"id": "claim-" + call.SagaID}, nil
	})
	rt, err := embedded.Start(embedded.Config{Actions: actions, Workers: 1, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	plan := compile(t, "expense.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "e-1", Input: map[string]any{"amount": 10}}); err != nil {
		t.Fatal(err)
	}
	st, err := rt.WaitReceiving(ctx, "e-1")
	if err != nil || st.Status != durable.StatusWaiting {
		t.Fatalf("%v %v", st, err)
	}
	time.Sleep(50 * time.Millisecond) // many ticks of the virtual-time loop: time must stand still
	if !clock.Now().Equal(start) {
		t.Fatalf("virtual time passed while the saga awaited and no one waited: %s", clock.Now().Sub(start))
	}
	d, err := rt.Signal(ctx, "e-1", "approved", map[string]any{"by": "ann"}, embedded.SignalID("mail-1"))
	if err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("%+v %v", d, err)
	}
	if st, err = rt.Wait(ctx, "e-1"); err != nil || st.Status != durable.StatusSucceeded || st.Vars["decision"].(map[string]any)["by"] != "ann" {
		t.Fatalf("%v %v", st, err)
	}

	began := clock.Now()
	st, err = rt.Run(ctx, &engine.StartParams{Plan: plan, SagaID: "e-2", Input: map[string]any{"amount": 10}})
	if err != nil || st.Status != durable.StatusSucceeded {
		t.Fatalf("%v %v", st, err)
	}
	if _, approved := st.Vars["decision"]; approved || clock.Now().Sub(began) != 72*time.Hour {
		t.Fatalf("vars %v after %s of virtual time", st.Vars, clock.Now().Sub(began))
	}
}

// A callback in virtual time: the token completed while the saga waits
// on it; a token whose attempt timed out (the test moves the clock past
// it) is refused, and the retry's token taken.
func TestCallbackInVirtualTime(t *testing.T) {
	clock := durable.NewManualClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	tokens := make(chan string, 4)
	actions := engine.NewRegistry()
	actions.SetFallback(func(ctx context.Context, call saga.Call) (any, error) {
		if call.CallbackToken != "" {
			tokens <- call.CallbackToken
		}
		return map[string]any{"id": "pending"}, nil
	})
	rt, err := embedded.Start(embedded.Config{Actions: actions, Workers: 1, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	plan := compile(t, "charge.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "c-1", Input: map[string]any{"amount": 10}}); err != nil {
		t.Fatal(err)
	}
	first := <-tokens
	if _, err := rt.WaitReceiving(ctx, "c-1"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour) // the callback's timeout: attempt 1 fails, attempt 2 gets a token
	second := <-tokens
	if _, err := rt.WaitReceiving(ctx, "c-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.CompleteCallback(ctx, first, map[string]any{"id": "late"}); !errors.Is(err, saga.ErrTokenNotAwaited) {
		t.Fatalf("the timed-out attempt's token: %v", err)
	}
	d, err := rt.CompleteCallback(ctx, second, map[string]any{"id": "pay-1"})
	if err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("%+v %v", d, err)
	}
	st, err := rt.Wait(ctx, "c-1")
	if err != nil || st.Status != durable.StatusSucceeded || st.Vars["payment"].(map[string]any)["id"] != "pay-1" {
		t.Fatalf("%v %v", st, err)
	}
	if _, err := rt.FailCallback(ctx, "not-a-token", "X", ""); !errors.Is(err, saga.ErrBadToken) {
		t.Fatalf("%v", err)
	}
}
