package order_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/embedded"
	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/saga"
)

func input(t *testing.T, file string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOrderSaga(t *testing.T) {
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file    string
		status  durable.Status
		effects []string
	}{
		{"testdata/ok.json", durable.StatusSucceeded, []string{"reserve o-1001", "charge o-1001", "ship o-1001"}},
		{"testdata/declined.json", durable.StatusCompensated, []string{"reserve o-1002", "release o-1002"}},
		{"testdata/nostock.json", durable.StatusCompensated, nil},
		{"testdata/unshippable.json", durable.StatusCompensated, []string{"reserve o-1004", "charge o-1004", "refund o-1004", "release o-1004"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			svc := order.NewServices()
			reg := engine.NewRegistry()
			svc.Register(reg)
			rt, err := embedded.Start(embedded.Config{Actions: reg})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			st, err := rt.Run(ctx, &engine.StartParams{Plan: plan, SagaID: "t-1", Input: input(t, tt.file)})
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != tt.status || !slices.Equal(svc.Effects, tt.effects) {
				t.Fatalf("%s with effects %v, want %s with %v (failure %v)", st.Status, svc.Effects, tt.status, tt.effects, st.Failure)
			}
		})
	}
}

// Redelivered calls reach the fake services with the same idempotency key,
// and their effects apply once.
func TestServicesHonourIdempotencyKeys(t *testing.T) {
	svc := order.NewServices()
	reg := engine.NewRegistry()
	svc.Register(reg)
	call := saga.Call{SagaID: "s", Step: "charge", Action: "payments.charge", Attempt: 1, IdempotencyKey: "s/charge/2",
		Input: map[string]any{"order_id": "o-9", "amount_cents": int64(500), "currency": "EUR", "card": "4242"}}
	for range 3 {
		if _, err := reg.Invoke(context.Background(), call); err != nil {
			t.Fatal(err)
		}
	}
	if svc.Charged["o-9"] != 500 || svc.Calls() != 3 || len(svc.Effects) != 1 {
		t.Fatalf("charged %d after %d calls, effects %v", svc.Charged["o-9"], svc.Calls(), svc.Effects)
	}
}
