package sqshandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/cost"
	"github.com/lambdasaga/lambdasaga/internal/emf"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

const paySaga = `
saga: pay
input: {id: string}
steps:
  - id: charge
    action: pay.charge
  - id: done
    succeed: {}
`

// The EstimatedCost a function writes for a saga equals sagactl cost's
// figure for the same path and measurements: a start (the item and its
// index entry put, the first message sent), one message handled in a
// batch of one (a receive and a delete, a read, the action's 250 ms at
// 256 MB, a write that moves the index entry).
func TestEstimatedCostIsTheCostModels(t *testing.T) {
	t.Parallel()
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	q := memqueue.New(memqueue.Config{Clock: clock})
	var out bytes.Buffer
	rec := emf.New(emf.Config{Out: &out, Function: "advance-fn", Now: clock.Now, MemoryMB: 256})
	reg := engine.NewRegistry()
	reg.MustRegister("pay.charge", func(context.Context, saga.Call) (any, error) {
		clock.Advance(250 * time.Millisecond)
		return map[string]any{}, nil
	})
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: rec.Store(memstore.New()), Queue: rec.Queue(q), Actions: reg,
		Clock: clock, Rand: func() float64 { return 0.5 }, OnStep: rec.OnStep, ChainSteps: -1})
	if err != nil {
		t.Fatal(err)
	}
	h, err := sqshandler.New(sqshandler.Config{Coordinator: coord, Margin: time.Second, Metrics: rec})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := saga.Compile("pay.yaml", []byte(paySaga), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const id = "c0ffee00-0000-4000-8000-000000000001" // 36 bytes, as the model's default
	if _, err := coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: id, Input: map[string]any{"id": id}}); err != nil {
		t.Fatal(err)
	}
	ds, err := q.Receive(context.Background(), &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10})
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %d messages, %v", len(ds), err)
	}
	if _, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m0", Body: string(ds[0].Body)}}}); err != nil {
		t.Fatal(err)
	}

	walk, err := cost.Walk(plan, cost.Params{MemoryMB: 256, Duration: 250 * time.Millisecond, BatchSize: 1, ChainSteps: -1, Input: map[string]any{"id": id}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := walk.CostLambdaSaga
	var bySaga, byFunction float64
	for line := range strings.Lines(out.String()) {
		checkEMF(t, line)
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatal(err)
		}
		v, ok := doc[emf.EstimatedCost].(float64)
		switch {
		case !ok:
		case doc[emf.DimSagaName] == "pay":
			bySaga = v
			if !strings.Contains(line, `"Dimensions":[["SagaName"],[]]`) || !strings.Contains(line, `{"Name":"EstimatedCost","Unit":"None"}`) {
				t.Errorf("saga line without the dimensions or the unit: %s", line)
			}
		case doc[emf.DimFunction] == "advance-fn":
			byFunction = v
		}
	}
	if bySaga != want || byFunction != want {
		t.Errorf("EstimatedCost: saga pay %v, function %v; sagactl cost's %v (%+v)", bySaga, byFunction, want, walk.CostBreakdownUSD)
	}
}
