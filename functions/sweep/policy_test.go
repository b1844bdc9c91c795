package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

const forkDefinition = `saga: fan
input: {items: list}
steps:
  - id: each
    foreach: "${input.items}"
    concurrency: 2
    steps:
      - {id: ship, action: shipping.send, with: {sku: "${item}"}, out: parcel}
    out: parcels
`

// A sweep runs on the emulators signed as SweepFunction, so that the
// recording proxies of make test attribute its calls to it and the IAM
// check evaluates each against SweepFunction's policy in
// infra/template.yaml with a policy engine (internal/iamcheck): a sweep
// that re-sends a saga whose start message was lost, and one that repairs
// a fork whose parent was cancelled while the stop of its children was
// lost (it fails the fork record and stops the children again).
func TestSweepOnTheEmulatorsSignsAsItsFunction(t *testing.T) {
	b := awstest.New(t)
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	q := &failingQueue{Queue: b.Queue}
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: q, Actions: engine.NewRegistry(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"order_id": "o", "customer": "c", "amount": 1.0, "currency": "EUR", "card": "4242", "items": []any{"a"}}
	q.fail = true
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "stranded", Input: in}); err == nil {
		t.Fatal("start sent its message despite the failing queue")
	}
	fork, err := saga.Compile("fan.yaml", []byte(forkDefinition), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: fork, SagaID: "fan", Input: map[string]any{"items": []any{"a", "b", "c"}}}); err != nil {
		t.Fatal(err)
	}
	q.fail = true
	if _, err := coord.Cancel(ctx, "fan"); err == nil {
		t.Fatal("the cancel sent its stop despite the failing queue")
	}
	clock.Advance(30 * time.Minute)

	store, queue := b.As(t, "SweepFunction")
	sweepCoord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: store, Queue: queue, Actions: engine.NewRegistry(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	b.Counter.Reset()
	s := &sweeper{coord: sweepCoord, log: slog.New(slog.DiscardHandler), idleFor: 20 * time.Minute, maxResends: engine.DefaultMaxResends,
		metrics: &strings.Builder{}, function: "sweep-fn"}
	event, err := os.ReadFile("../../infra/events/schedule.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := lambda.NewHandler(s.handle).Invoke(ctx, event)
	if err != nil {
		t.Fatal(err)
	}
	var res result
	if err := json.Unmarshal(out, &res); err != nil || res.Sweep == nil || res.Sweep.Resent < 2 {
		t.Fatalf("sweep on the emulators: %s %v", out, err)
	}
	t.Logf("the sweep's calls: %v", b.Counter.Operations())
}
