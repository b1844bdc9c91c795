package lambdasaga_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/lambdasaga/lambdasaga"
)

// The order saga of the README, short: reserve stock, charge the card,
// and give the reservation back if the charge is declined.
const orderYAML = `
saga: order
input: {order_id: string, cents: int, card: secret string}
steps:
  - id: reserve
    action: inventory.reserve
    with: {order_id: "${input.order_id}"}
    out: reservation
    compensate:
      action: inventory.release
      with: {reservation: "${vars.reservation.id}"}
  - id: charge
    action: payments.charge
    with: {order_id: "${input.order_id}", cents: "${input.cents}", card: "${input.card}"}
    out: payment
    retry: {attempts: 3, backoff: 100ms, permanent: [CardDeclined]}
  - id: done
    succeed: {output: "${{'payment': vars.payment.id}}"}
`

type reserveIn struct {
	OrderID string `json:"order_id"`
}

type reservation struct {
	ID string `json:"id"`
}

type chargeIn struct {
	OrderID string `json:"order_id"`
	Cents   int64  `json:"cents"`
	Card    string `json:"card"`
}

type payment struct {
	ID string `json:"id"`
}

// orderActions are the order saga's actions. A real one passes
// call.IdempotencyKey to its service, so that a retry applies its effect
// once.
func orderActions() *lambdasaga.Actions {
	actions := lambdasaga.NewActions()
	actions.MustRegister("inventory.reserve", lambdasaga.Typed(func(ctx context.Context, call lambdasaga.Call, in reserveIn) (reservation, error) {
		return reservation{ID: "r-" + in.OrderID}, nil
	}))
	actions.MustRegister("inventory.release", lambdasaga.Typed(func(ctx context.Context, call lambdasaga.Call, in struct{ Reservation string }) (any, error) {
		fmt.Println("released", in.Reservation)
		return nil, nil
	}))
	actions.MustRegister("payments.charge", lambdasaga.Typed(func(ctx context.Context, call lambdasaga.Call, in chargeIn) (payment, error) {
		if in.Card == "4000000000000002" {
			return payment{}, lambdasaga.NewError("CardDeclined", "the card was declined")
		}
		return payment{ID: "p-" + in.OrderID}, nil
	}))
	return actions
}

// Actions are Go functions registered by the names the definition calls;
// Typed decodes each call's input into a type of yours.
func ExampleTyped() {
	actions := lambdasaga.NewActions()
	actions.MustRegister("payments.charge", lambdasaga.Typed(func(ctx context.Context, call lambdasaga.Call, in chargeIn) (payment, error) {
		if in.Cents <= 0 {
			return payment{}, lambdasaga.Permanent(lambdasaga.NewError("InvalidAmount", "nothing to charge"))
		}
		// Pass call.IdempotencyKey to the payment service, so that a
		// retried call charges once.
		return payment{ID: "p-" + in.OrderID}, nil
	}))
	fmt.Println(actions.Names())
	// Output:
	// [payments.charge]
}

// A definition is checked before anything runs: every problem at once,
// each with its file:line, step and field.
func ExampleParseDefinition() {
	_, err := lambdasaga.ParseDefinition("order.yaml", []byte(`
saga: order
input: {order_id: string}
steps:
  - id: charge
    action: payments.charge
    with: {order: "${input.orderid}"}
    retry: {attempts: 0}
`))
	fmt.Println(err)
	// Output:
	// order.yaml:7:22: step charge: with.order: input has no field "orderid" (declared: order_id) (in ${input.orderid})
	// order.yaml:8:23: step charge: retry.attempts: "0" must be a whole number from 1 to 100
}

// In process, a saga runs through the protocol the Lambda functions run:
// for tests and tools. A declined card compensates the reservation.
func ExampleLocal() {
	def, err := lambdasaga.ParseDefinition("order.yaml", []byte(orderYAML))
	if err != nil {
		panic(err)
	}
	local, err := lambdasaga.NewLocal(orderActions(), lambdasaga.LocalOptions{VirtualTime: true})
	if err != nil {
		panic(err)
	}
	defer local.Close()
	ctx := context.Background()

	ok, err := local.Run(ctx, def, lambdasaga.StartOptions{ID: "o-1", Input: map[string]any{"order_id": "o-1", "cents": 4250, "card": "4242424242424242"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(ok.ID, ok.Status, ok.Output)

	declined, err := local.Run(ctx, def, lambdasaga.StartOptions{ID: "o-2", Input: map[string]any{"order_id": "o-2", "cents": 100, "card": "4000000000000002"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(declined.ID, declined.Status, declined.Failure)
	// Output:
	// o-1 succeeded map[payment:p-o-1]
	// released r-o-2
	// o-2 compensated step charge: CardDeclined: the card was declined
}

// A saga's history: every transition, oldest first.
func ExampleClient_History() {
	def, err := lambdasaga.ParseDefinition("order.yaml", []byte(orderYAML))
	if err != nil {
		panic(err)
	}
	local, err := lambdasaga.NewLocal(orderActions(), lambdasaga.LocalOptions{VirtualTime: true})
	if err != nil {
		panic(err)
	}
	defer local.Close()
	ctx := context.Background()
	if _, err := local.Run(ctx, def, lambdasaga.StartOptions{ID: "o-1", Input: map[string]any{"order_id": "o-1", "cents": 4250, "card": "4242424242424242"}}); err != nil {
		panic(err)
	}
	history, err := local.History(ctx, "o-1")
	if err != nil {
		panic(err)
	}
	for _, e := range history {
		line := fmt.Sprint(e.Version, " ", e.Cause, ": ", e.Step, " ", e.Outcome)
		if e.Status != "" {
			line += ", saga " + string(e.Status)
		}
		fmt.Println(line)
	}
	// Output:
	// 1 start: reserve started, saga running
	// 2 result: reserve completed
	// 2 result: charge started
	// 3 result: charge completed, saga succeeded
	// 3 result: done completed, saga succeeded
}

// Against a deployment: the stack's outputs name the table and queues.
// The functions run the saga; the client starts and reads it.
func ExampleNewClient() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		panic(err)
	}
	client, err := lambdasaga.NewClient(lambdasaga.ClientConfig{AWS: cfg,
		Table: os.Getenv("TABLE"), AdvanceQueueURL: os.Getenv("ADVANCE_QUEUE_URL"), CompensateQueueURL: os.Getenv("COMPENSATE_QUEUE_URL")})
	if err != nil {
		panic(err)
	}
	def, err := lambdasaga.LoadDefinition(os.DirFS("examples/order"), "order.yaml")
	if err != nil {
		panic(err)
	}
	s, err := client.Start(ctx, def, lambdasaga.StartOptions{ID: "o-1001", Input: map[string]any{"order_id": "o-1001"}})
	if err != nil {
		panic(err)
	}
	for !s.Status.Final() && s.Status != lambdasaga.StatusCompensationFailed {
		time.Sleep(time.Second)
		if s, err = client.Get(ctx, s.ID); errors.Is(err, lambdasaga.ErrNotFound) {
			panic(err)
		}
	}
	fmt.Println(s.Status)
}

// The main of the Lambda function that runs the steps with your actions:
// deploy it as the advance and the compensate function.
func ExampleStartLambda() {
	lambdasaga.StartLambda(orderActions())
}
