package order_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/embedded"
	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/saga"
)

// The order saga with the payment provider's webhook, in virtual time:
// charge asks the provider and the saga waits on the step's token; the
// provider's webhook completes it (the confirmed payment becomes the
// step's out), or declines it, and the saga compensates the charge and
// the reservation.
func TestOrderWithPaymentWebhook(t *testing.T) {
	plan, err := saga.Compile("order-webhook.yaml", order.WebhookDefinition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		webhook func(ctx context.Context, rt *embedded.Runtime, token string) (*engine.Delivered, error)
		status  durable.Status
		effects []string
	}{
		{"confirmed", func(ctx context.Context, rt *embedded.Runtime, token string) (*engine.Delivered, error) {
			return rt.CompleteCallback(ctx, token, map[string]any{"order_id": "o-1001", "payment_id": "p-o-1001", "amount_cents": 4250, "status": "captured"})
		}, durable.StatusSucceeded, []string{"reserve o-1001", "request-charge o-1001", "ship o-1001"}},
		{"declined", func(ctx context.Context, rt *embedded.Runtime, token string) (*engine.Delivered, error) {
			return rt.FailCallback(ctx, token, "CardDeclined", "the card was declined")
		}, durable.StatusCompensated, []string{"reserve o-1001", "request-charge o-1001", "refund o-1001", "release o-1001"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := order.NewServices()
			reg := engine.NewRegistry()
			svc.Register(reg)
			rt, err := embedded.Start(embedded.Config{Actions: reg, Workers: 1, Clock: durable.NewManualClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "o-1001", Input: input(t, "testdata/ok.json")}); err != nil {
				t.Fatal(err)
			}
			st, err := rt.WaitReceiving(ctx, "o-1001")
			if err != nil || st.Status != durable.StatusWaiting || st.Vars["payment"].(map[string]any)["status"] != "pending" {
				t.Fatalf("%v %v", st, err)
			}
			d, err := tc.webhook(ctx, rt, svc.Pending["o-1001"])
			if err != nil || d.Receipt != saga.ReceiptApplied {
				t.Fatalf("webhook: %+v %v", d, err)
			}
			if st, err = rt.Wait(ctx, "o-1001"); err != nil || st.Status != tc.status || !slices.Equal(svc.Effects, tc.effects) {
				t.Fatalf("%v %v, effects %v", st, err, svc.Effects)
			}
			if tc.status == durable.StatusSucceeded && st.Vars["payment"].(map[string]any)["status"] != "captured" {
				t.Fatalf("payment %v", st.Vars["payment"])
			}
			if tc.status == durable.StatusCompensated && (st.Failure.Type != "CardDeclined" || svc.Charged["o-1001"] != 0) {
				t.Fatalf("failure %v, charged %d", st.Failure, svc.Charged["o-1001"])
			}
		})
	}
}
