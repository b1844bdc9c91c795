package main

import (
	"bytes"
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
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// failingQueue refuses the first send: a start cut off after its write.
type failingQueue struct {
	durable.Queue
	fail bool
}

func (q *failingQueue) Send(ctx context.Context, msgs []durable.Message) error {
	if q.fail {
		q.fail = false
		return os.ErrDeadlineExceeded
	}
	return q.Queue.Send(ctx, msgs)
}

func TestSweepHandlerResendsStrandedSaga(t *testing.T) {
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	mq := memqueue.New(memqueue.Config{Clock: clock})
	q := &failingQueue{Queue: mq, fail: true}
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: memstore.New(), Queue: q, Actions: engine.NewRegistry(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := saga.Compile("order.yaml", order.Definition, saga.Options{})
	in := map[string]any{"order_id": "o", "customer": "c", "amount": 1.0, "currency": "EUR", "card": "4242", "items": []any{"a"}}
	if _, err := coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "stranded", Input: in}); err == nil {
		t.Fatal("start sent its message despite the failing queue")
	}
	clock.Advance(30 * time.Minute)
	var metrics bytes.Buffer
	s := &sweeper{coord: coord, log: slog.New(slog.DiscardHandler), idleFor: 20 * time.Minute, metrics: &metrics, function: "sweep-fn"}
	event, err := os.ReadFile("../../infra/events/schedule.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := lambda.NewHandler(s.handle).Invoke(context.Background(), event)
	if err != nil {
		t.Fatal(err)
	}
	var both result
	if err := json.Unmarshal(out, &both); err != nil || both.Sweep == nil || both.Tick == nil {
		t.Fatalf("a scheduled event without a job: %s %v; want the tick and the sweep", out, err)
	}
	res := *both.Sweep
	if res.Resent != 1 || res.Checked != 1 {
		t.Fatalf("%s %v", out, err)
	}
	if mq.Len(durable.QueueAdvance) != 1 {
		t.Fatalf("%d messages after the sweep", mq.Len(durable.QueueAdvance))
	}
	// One embedded-metric-format line with the counts.
	var emf struct {
		AWS struct {
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Function             string
		SweepChecked         int
		SweepResent          int
		SagasLeftForOperator *int
	}
	if err := json.Unmarshal(metrics.Bytes(), &emf); err != nil || strings.Count(metrics.String(), "\n") != 1 {
		t.Fatalf("metrics %q: %v", metrics.String(), err)
	}
	m := emf.AWS.CloudWatchMetrics
	if len(m) != 1 || m[0].Namespace != "lambdasaga" || len(m[0].Metrics) != 3 || emf.Function != "sweep-fn" ||
		emf.SweepChecked != 1 || emf.SweepResent != 1 || emf.SagasLeftForOperator == nil || *emf.SagasLeftForOperator != 0 {
		t.Fatalf("metrics %s", metrics.String())
	}
}

// Every minute the template sends {"job": "tick"}: a timer due within the
// minute gets its message, and nothing is swept; a job it does not know is
// an error.
func TestTickJobFiresDueTimers(t *testing.T) {
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	mq := memqueue.New(memqueue.Config{Clock: clock})
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) { return nil, nil })
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: memstore.New(), Queue: mq, Actions: reg, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := saga.Compile("w.yaml", []byte("saga: w\nsteps:\n  - {id: pause, wait: {for: 48h}}\n  - {id: go, action: a}\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "w-1"}); err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	s := &sweeper{coord: coord, log: slog.New(slog.DiscardHandler), idleFor: 20 * time.Minute, metrics: &metrics}
	h := lambda.NewHandler(s.handle)
	clock.Advance(48*time.Hour - 30*time.Second)
	out, err := h.Invoke(context.Background(), []byte(`{"job":"tick"}`))
	var res result
	if err != nil || json.Unmarshal(out, &res) != nil || res.Tick == nil || res.Tick.Sent != 1 || res.Sweep != nil {
		t.Fatalf("tick: %s %v", out, err)
	}
	if mq.Len(durable.QueueAdvance) != 1 || metrics.Len() != 0 {
		t.Fatalf("%d messages, metrics %q: want the timer's message and no sweep", mq.Len(durable.QueueAdvance), metrics.String())
	}
	if _, err := h.Invoke(context.Background(), []byte(`{"job":"sweeep"}`)); err == nil || !strings.Contains(err.Error(), "sweeep") {
		t.Fatalf("an unknown job: %v", err)
	}
}
