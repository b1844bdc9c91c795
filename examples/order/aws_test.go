package order_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
)

// TestOrderSagaOnEmulators runs the order saga in process on dynalite and
// fauxqs, with workers polling the queues. Its economy per step (reads,
// writes, sends, units billed) is measured in bench (TestRequestEconomy).
func TestOrderSagaOnEmulators(t *testing.T) {
	def := definition(t, "order.yaml")
	tests := []struct {
		file    string
		status  lambdasaga.Status
		effects []string
	}{
		{"testdata/ok.json", lambdasaga.StatusSucceeded, []string{"reserve o-1001", "charge o-1001", "ship o-1001"}},
		{"testdata/declined.json", lambdasaga.StatusCompensated, []string{"reserve o-1002", "release o-1002"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			be := awstest.New(t)
			svc := order.NewServices()
			actions := lambdasaga.NewActions()
			svc.Register(actions)
			local, err := lambdasaga.NewLocal(actions, lambdasaga.LocalOptions{Store: be.Store, Queue: be.Queue, Receiver: be.Queue, Visibility: 5 * time.Second, PollInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer local.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			s, err := local.Run(ctx, def, lambdasaga.StartOptions{ID: "e2e-1", Input: input(t, tt.file)})
			if err != nil {
				t.Fatal(err)
			}
			if s.Status != tt.status || !slices.Equal(svc.Effects, tt.effects) {
				t.Fatalf("%s with effects %v, want %s with %v (failure %v)", s.Status, svc.Effects, tt.status, tt.effects, s.Failure)
			}
		})
	}
}
