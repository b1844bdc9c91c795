package order_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga"
	"github.com/lambdasaga/lambdasaga/examples/order"
)

// The order saga with the payment provider's webhook, in virtual time:
// charge asks the provider and the saga waits on the step's token; the
// provider's webhook completes it (the confirmed payment becomes the
// step's out), or declines it, and the saga compensates the charge and
// the reservation.
func TestOrderWithPaymentWebhook(t *testing.T) {
	def := definition(t, "order-webhook.yaml")
	for _, tc := range []struct {
		name    string
		webhook func(ctx context.Context, local *lambdasaga.Local, token string) (*lambdasaga.Delivered, error)
		status  lambdasaga.Status
		effects []string
	}{
		{"confirmed", func(ctx context.Context, local *lambdasaga.Local, token string) (*lambdasaga.Delivered, error) {
			return local.CompleteCallback(ctx, token, map[string]any{"order_id": "o-1001", "payment_id": "p-o-1001", "amount_cents": 4250, "status": "captured"})
		}, lambdasaga.StatusSucceeded, []string{"reserve o-1001", "request-charge o-1001", "ship o-1001"}},
		{"declined", func(ctx context.Context, local *lambdasaga.Local, token string) (*lambdasaga.Delivered, error) {
			return local.FailCallback(ctx, token, "CardDeclined", "the card was declined")
		}, lambdasaga.StatusCompensated, []string{"reserve o-1001", "request-charge o-1001", "refund o-1001", "release o-1001"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := order.NewServices()
			actions := lambdasaga.NewActions()
			svc.Register(actions)
			local, err := lambdasaga.NewLocal(actions, lambdasaga.LocalOptions{Workers: 1, VirtualTime: true, Now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)})
			if err != nil {
				t.Fatal(err)
			}
			defer local.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := local.Start(ctx, def, lambdasaga.StartOptions{ID: "o-1001", Input: input(t, "testdata/ok.json")}); err != nil {
				t.Fatal(err)
			}
			s, err := local.WaitReceiving(ctx, "o-1001")
			if err != nil || s.Status != lambdasaga.StatusWaiting || s.Step != "charge" {
				t.Fatalf("%+v %v", s, err)
			}
			d, err := tc.webhook(ctx, local, svc.Pending["o-1001"])
			if err != nil || d.Receipt != lambdasaga.ReceiptApplied {
				t.Fatalf("webhook: %+v %v", d, err)
			}
			if s, err = local.Wait(ctx, "o-1001"); err != nil || s.Status != tc.status || !slices.Equal(svc.Effects, tc.effects) {
				t.Fatalf("%+v %v, effects %v", s, err, svc.Effects)
			}
			// The completion's output, not the request's, is the step's
			// out: the succeed output reads the amount it confirmed.
			if tc.status == lambdasaga.StatusSucceeded && fmt.Sprint(s.Output.(map[string]any)["charged_cents"]) != "4250" {
				t.Fatalf("output %v", s.Output)
			}
			if tc.status == lambdasaga.StatusCompensated && (s.Failure.Type != "CardDeclined" || svc.Charged["o-1001"] != 0) {
				t.Fatalf("failure %v, charged %d", s.Failure, svc.Charged["o-1001"])
			}
		})
	}
}
