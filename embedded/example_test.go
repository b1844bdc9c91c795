package embedded_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/embedded"
	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/saga"
)

// Compile a saga and run it in this process, on the memory store and
// queue, through the same coordinator the Lambda functions use. The
// shipment fails for good, so the charge is refunded and the stock
// released.
func Example() {
	src := []byte(`saga: order
input: {order_id: string, cents: int}
steps:
  - id: reserve
    action: inventory.reserve
    with: {order_id: "${input.order_id}"}
    compensate: {action: inventory.release, with: {order_id: "${input.order_id}"}}
  - id: charge
    action: payments.charge
    with: {order_id: "${input.order_id}", cents: "${input.cents}"}
    out: payment
    compensate: {action: payments.refund, with: {payment_id: "${vars.payment.id}"}}
  - id: ship
    action: shipping.send
    with: {order_id: "${input.order_id}"}
`)
	actions := engine.NewRegistry()
	actions.SetFallback(func(ctx context.Context, call saga.Call) (any, error) {
		fmt.Println(call.Action, call.IdempotencyKey)
		switch call.Action {
		case "payments.charge":
			return map[string]any{"id": "p-7"}, nil
		case "shipping.send":
			return nil, saga.Permanent(saga.NewError("NoCarrier", "no carrier today"))
		}
		return map[string]any{}, nil
	})
	rt, err := embedded.Start(embedded.Config{Actions: actions, Workers: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	plan, err := saga.Compile("order.yaml", src, saga.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := rt.Run(ctx, &engine.StartParams{Plan: plan, SagaID: "o-1001", Input: map[string]any{"order_id": "o-1001", "cents": 4250}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Status, "because", st.Failure)
	// Output:
	// inventory.reserve o-1001/reserve/1
	// payments.charge o-1001/charge/2
	// shipping.send o-1001/ship/3
	// payments.refund o-1001/charge.compensate/2
	// inventory.release o-1001/reserve.compensate/1
	// compensated because step ship: NoCarrier: no carrier today
}
