package embedded_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
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

// A test of a saga that waits 30 days, in virtual time: on a manual clock
// the runtime moves time on whenever nothing is in flight, so the wait
// passes at once.
func Example_virtualTime() {
	src := []byte(`saga: subscription
steps:
  - id: open
    action: accounts.open
  - id: trial
    wait: {for: 720h}
  - id: bill
    action: payments.charge
`)
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := durable.NewManualClock(start)
	actions := engine.NewRegistry()
	actions.SetFallback(func(ctx context.Context, call saga.Call) (any, error) {
		fmt.Println(call.Action, "on", clock.Now().Format("2006-01-02"))
		return map[string]any{}, nil
	})
	rt, err := embedded.Start(embedded.Config{Actions: actions, Workers: 1, Clock: clock})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	plan, err := saga.Compile("subscription.yaml", src, saga.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	began := time.Now()
	st, err := rt.Run(ctx, &engine.StartParams{Plan: plan, SagaID: "sub-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Status, "after", clock.Now().Sub(start), "of virtual time, under a second of real time:", time.Since(began) < time.Second)
	// Output:
	// accounts.open on 2026-12-01
	// payments.charge on 2026-12-31
	// succeeded after 720h0m0s of virtual time, under a second of real time: true
}
