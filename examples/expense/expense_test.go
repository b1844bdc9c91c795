package expense_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/expense"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A rejection fails the check, and the claim is withdrawn; an approval
// sent as the saga starts (kept if the await has not come yet) is taken by
// the await, and no virtual time passes.
func TestRejectedAndEarlyApproval(t *testing.T) {
	plan, err := saga.Compile("expense.yaml", expense.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		decision map[string]any
		early    bool
		status   durable.Status
		effects  []string
	}{
		{"rejected", map[string]any{"approved": false, "by": "maria"}, false, durable.StatusCompensated, []string{"file x-1", "withdraw x-1"}},
		{"approved as it starts", map[string]any{"approved": true, "by": "maria"}, true, durable.StatusSucceeded, []string{"file x-1", "reimburse x-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := durable.NewManualClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
			svc := expense.NewServices()
			reg := engine.NewRegistry()
			svc.Register(reg)
			rt, err := embedded.Start(embedded.Config{Actions: reg, Workers: 1, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			in := map[string]any{"claim_id": "x-1", "employee": "ada", "cents": 100}
			if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "x-1", Input: in}); err != nil {
				t.Fatal(err)
			}
			if !tc.early {
				if _, err := rt.WaitReceiving(ctx, "x-1"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := rt.Signal(ctx, "x-1", "approved", tc.decision); err != nil {
				t.Fatal(err)
			}
			st, err := rt.Wait(ctx, "x-1")
			if err != nil || st.Status != tc.status || !slices.Equal(svc.Effects, tc.effects) {
				t.Fatalf("%v %v, effects %v", st, err, svc.Effects)
			}
			if tc.early && clock.Now().Sub(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) != 0 {
				t.Fatalf("the approval did not end the await: virtual time is %s", clock.Now())
			}
		})
	}
}
