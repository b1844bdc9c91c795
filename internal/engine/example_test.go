package engine_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A Coordinator on the memory store and queue, with a clock the example
// moves by hand: the charge fails twice with a retryable error, and each
// retry waits for its backoff on that clock before the queue delivers it.
// A worker (RunWorker, or the Lambda functions) does what the loop does.
func ExampleCoordinator() {
	ctx := context.Background()
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	queue := memqueue.New(memqueue.Config{Clock: clock})
	actions := engine.NewRegistry()
	tries := 0
	actions.MustRegister("payments.charge", func(ctx context.Context, call saga.Call) (any, error) {
		if tries++; tries < 3 {
			return nil, saga.NewError("Unavailable", "the bank is busy")
		}
		return map[string]any{"payment_id": "p-1"}, nil
	})
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{
		Store: memstore.New(), Queue: queue, Actions: actions, Clock: clock,
		Rand: func() float64 { return 0.5 }, // jitter, drawn from here: fixed for the example
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	plan, err := saga.Compile("pay.yaml", []byte(`saga: pay
steps:
  - id: charge
    action: payments.charge
    retry: {attempts: 3, backoff: 10s, jitter: false}
    out: payment
  - id: done
    succeed: {output: "${vars.payment.payment_id}"}
`), saga.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "pay-1"})
	for err == nil && !st.Status.Final() {
		ds, _ := queue.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1})
		if len(ds) == 0 {
			clock.Advance(time.Second) // nothing due yet: a retry waits for its backoff
			continue
		}
		outcome, _ := coord.Handle(ctx, ds[0].Body)
		_ = queue.Delete(ctx, &durable.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle})
		st, err = coord.Get(ctx, "pay-1")
		fmt.Println(clock.Now().Format("15:04:05"), outcome, "version", st.Version, st.Status)
	}
	fmt.Println(st.Output, err)
	// Output:
	// 09:00:00 step version 2 running
	// 09:00:10 step version 3 running
	// 09:00:30 step version 4 succeeded
	// p-1 <nil>
}

// Typed registers an action whose input and output are Go types: the
// call's input (the step's with) is decoded into In, and Out is stored as
// the step's output.
func ExampleTyped() {
	type chargeIn struct {
		OrderID string `json:"order_id"`
		Cents   int64  `json:"cents"`
	}
	type chargeOut struct {
		PaymentID string `json:"payment_id"`
	}
	actions := engine.NewRegistry()
	actions.MustRegister("payments.charge", engine.Typed(func(ctx context.Context, call saga.Call, in chargeIn) (chargeOut, error) {
		if in.Cents <= 0 {
			return chargeOut{}, saga.Permanent(saga.NewError("InvalidAmount", "nothing to charge"))
		}
		// Pass call.IdempotencyKey to the payment service, so a retried
		// call charges once.
		return chargeOut{PaymentID: "p-" + in.OrderID}, nil
	}))
	out, err := actions.Invoke(context.Background(), saga.Call{
		Action: "payments.charge", IdempotencyKey: "o-1/charge/1",
		Input: map[string]any{"order_id": "o-1", "cents": int64(4250)},
	})
	fmt.Printf("%+v %v\n", out, err)
	_, err = actions.Invoke(context.Background(), saga.Call{Action: "payments.charge", Input: map[string]any{"order_id": "o-2", "cents": int64(0)}})
	fmt.Println(err, saga.IsPermanent(err), saga.ErrorType(err))
	// Output:
	// {PaymentID:p-o-1} <nil>
	// InvalidAmount: nothing to charge true InvalidAmount
}
