package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
	"github.com/lambdasaga/lambdasaga/saga"
)

// Every DynamoDB and SQS operation a sweep makes must be allowed
// by the SweepFunction's policy in infra/template.yaml, or the deployed
// sweep fails with AccessDenied where the emulators (which check no IAM)
// pass. The operations are taken from what a sweep that re-sends a
// stranded saga really calls on the emulators, not from a list kept by hand.
func TestSweepPolicyAllowsEveryCallASweepMakes(t *testing.T) {
	b := awstest.New(t)
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	q := &failingQueue{Queue: b.Queue, fail: true}
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: q, Actions: engine.NewRegistry(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"order_id": "o", "customer": "c", "amount": 1.0, "currency": "EUR", "card": "4242", "items": []any{"a"}}
	if _, err := coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "stranded", Input: in}); err == nil {
		t.Fatal("start sent its message despite the failing queue")
	}
	clock.Advance(30 * time.Minute)
	b.Counter.Reset()
	s := &sweeper{coord: coord, log: slog.New(slog.DiscardHandler), idleFor: 20 * time.Minute, maxResends: engine.DefaultMaxResends,
		metrics: &strings.Builder{}, function: "sweep-fn"}
	event, err := os.ReadFile("../../infra/events/schedule.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := lambda.NewHandler(s.handle).Invoke(context.Background(), event)
	if err != nil {
		t.Fatal(err)
	}
	var res result
	if err := json.Unmarshal(out, &res); err != nil || res.Sweep == nil || res.Sweep.Resent != 1 {
		t.Fatalf("sweep on the emulators: %s %v", out, err)
	}

	tmpl, err := samtemplate.Load("../../infra/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var allowed []string
	for _, f := range tmpl.Functions {
		if f.Name != "SweepFunction" {
			continue
		}
		for _, st := range f.Policies {
			if st.Effect == "Allow" || st.Effect == "" {
				allowed = append(allowed, st.Actions...)
			}
		}
	}
	if len(allowed) == 0 {
		t.Fatal("no SweepFunction policy found in the template")
	}
	for _, op := range b.Counter.Operations() {
		service, name, _ := strings.Cut(op, ".")
		action := strings.ToLower(service) + ":" + name
		if !slices.Contains(allowed, action) {
			t.Errorf("the sweep calls %s, which SweepFunction's policy does not allow (it allows %v): deployed, that call is AccessDenied", action, allowed)
		}
	}
}
