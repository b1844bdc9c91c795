package sqshandler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdasaga/lambdasaga"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/frontdoor"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

// The handler takes an SQS event as Lambda delivers it, here the fixture
// that sam local invoke uses (infra/events/advance-batch.json: a message
// for saga order-1001's reserve step, and a body that is not a message),
// and reports the records that failed, so that Lambda deletes the rest and
// the malformed one reaches the dead-letter queue untouched. The reserve
// step's record runs the steps after it too, in a chain: one write each
// and no queue hop, so the saga ends in this one invocation.
func ExampleHandler_Handle() {
	ctx := context.Background()
	actions := lambdasaga.NewActions()
	order.NewServices().Register(actions)
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: memstore.New(), Queue: memqueue.New(memqueue.Config{}), Actions: frontdoor.Registry(actions)})
	if err != nil {
		fmt.Println(err)
		return
	}
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	in := map[string]any{"order_id": "order-1001", "customer": "ada", "amount": 42.5, "currency": "EUR", "card": "4242", "items": []any{"book"}}
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "order-1001", Input: in}); err != nil {
		fmt.Println(err)
		return
	}
	h, err := sqshandler.New(sqshandler.Config{Coordinator: coord})
	if err != nil {
		fmt.Println(err)
		return
	}
	raw, err := os.ReadFile("../../infra/events/advance-batch.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		fmt.Println(err)
		return
	}
	resp, err := h.Handle(ctx, ev)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range resp.BatchItemFailures {
		fmt.Println("failed:", f.ItemIdentifier)
	}
	st, _ := coord.Get(ctx, "order-1001")
	fmt.Println("order-1001 at version", st.Version, st.Status)
	// Output:
	// failed: 33333333-3333-4333-8333-333333333333
	// order-1001 at version 4 succeeded
}
