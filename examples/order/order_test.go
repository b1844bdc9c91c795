package order_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga"
	"github.com/lambdasaga/lambdasaga/examples/order"
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

func definition(t *testing.T, file string) *lambdasaga.Definition {
	t.Helper()
	def, err := lambdasaga.LoadDefinition(os.DirFS("."), file)
	if err != nil {
		t.Fatal(err)
	}
	return def
}

func TestOrderSaga(t *testing.T) {
	def := definition(t, "order.yaml")
	tests := []struct {
		file    string
		status  lambdasaga.Status
		effects []string
	}{
		{"testdata/ok.json", lambdasaga.StatusSucceeded, []string{"reserve o-1001", "charge o-1001", "ship o-1001"}},
		{"testdata/declined.json", lambdasaga.StatusCompensated, []string{"reserve o-1002", "release o-1002"}},
		{"testdata/nostock.json", lambdasaga.StatusCompensated, nil},
		{"testdata/unshippable.json", lambdasaga.StatusCompensated, []string{"reserve o-1004", "charge o-1004", "refund o-1004", "release o-1004"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			svc := order.NewServices()
			actions := lambdasaga.NewActions()
			svc.Register(actions)
			local, err := lambdasaga.NewLocal(actions, lambdasaga.LocalOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer local.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := local.Run(ctx, def, lambdasaga.StartOptions{ID: "t-1", Input: input(t, tt.file)})
			if err != nil {
				t.Fatal(err)
			}
			if s.Status != tt.status || !slices.Equal(svc.Effects, tt.effects) {
				t.Fatalf("%s with effects %v, want %s with %v (failure %v)", s.Status, svc.Effects, tt.status, tt.effects, s.Failure)
			}
		})
	}
}

// Redelivered calls reach the fake services with the same idempotency key,
// and their effects apply once.
func TestServicesHonourIdempotencyKeys(t *testing.T) {
	svc := order.NewServices()
	actions := lambdasaga.NewActions()
	svc.Register(actions)
	call := lambdasaga.Call{SagaID: "s", Step: "charge", Action: "payments.charge", Attempt: 1, IdempotencyKey: "s/charge/2",
		Input: map[string]any{"order_id": "o-9", "amount_cents": int64(500), "currency": "EUR", "card": "4242"}}
	for range 3 {
		if _, err := actions.Invoke(context.Background(), call); err != nil {
			t.Fatal(err)
		}
	}
	if svc.Charged["o-9"] != 500 || svc.Calls() != 3 || len(svc.Effects) != 1 {
		t.Fatalf("charged %d after %d calls, effects %v", svc.Charged["o-9"], svc.Calls(), svc.Effects)
	}
}
