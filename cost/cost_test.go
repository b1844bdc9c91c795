package cost_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/cost"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/saga"
)

func TestOrderSagaCost(t *testing.T) {
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"order_id": "o", "customer": "c", "amount": 1.0, "currency": "EUR", "card": "4242", "items": []any{"a"}}
	p := cost.Params{MemoryMB: 256, Duration: 10 * time.Millisecond, StateBytes: 600, BatchSize: 1, Input: in}
	s, err := cost.Walk(plan, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	// reserve, price, charge, check, ship, done: three action steps, four writes.
	if s.ActionSteps != 3 || s.DynamoWrites != 4 || s.DynamoReads != 3 || s.SQSRequests != 9 || s.SFNTransitions != 6 || len(s.Path) != 6 {
		t.Fatalf("%+v", s)
	}
	// Per saga: 3 invocations ($0.2/M), 3 x 0.01 s x 0.25 GB, 9 SQS requests,
	// 4 WRU on the table and 7 on the by_status index (1 for the create, a
	// delete and a put for each of the 3 later transitions, whose update
	// time is the index key), 3 RRU.
	if s.IndexWRU != 7 {
		t.Fatalf("index write units %v, want 7", s.IndexWRU)
	}
	want := 3*0.2/1e6 + 3*0.01*0.25*0.0000133334 + 9*0.4/1e6 + (4+7)*0.625/1e6 + 3*0.125/1e6
	if math.Abs(s.CostLambdaSaga-want) > 1e-12 {
		t.Fatalf("cost %v, want %v", s.CostLambdaSaga, want)
	}
	if s.CostStepFnsSaga != 6*25.0/1e6 || s.CostStepFnsSaga <= s.CostLambdaSaga {
		t.Fatalf("step functions %v vs %v", s.CostStepFnsSaga, s.CostLambdaSaga)
	}
	var b strings.Builder
	s.Report(&b, "order", p, 1e6)
	if !strings.Contains(b.String(), "Step Functions Standard costs") {
		t.Fatal(b.String())
	}
	// The compensating path: ship fails, charge and reserve are undone.
	f, err := cost.Walk(plan, p, func(c saga.Call) bool { return c.Step == "ship" && !c.Compensation })
	if err != nil || f.Compensations != 2 || f.ActionSteps != 5 {
		t.Fatalf("%+v %v", f, err)
	}
}

// TestWalkRefusesFiguresThatCannotBe: a negative or non-finite figure
// would print a negative or NaN cost; zero still means the default.
func TestWalkRefusesFiguresThatCannotBe(t *testing.T) {
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"order_id": "o", "customer": "c", "amount": 1.0, "currency": "EUR", "card": "4242", "items": []any{"a"}}
	for _, tt := range []struct {
		p     cost.Params
		field string
	}{
		{cost.Params{BatchSize: math.NaN()}, "BatchSize"},
		{cost.Params{BatchSize: math.Inf(1)}, "BatchSize"},
		{cost.Params{BatchSize: -2}, "BatchSize"},
		{cost.Params{MemoryMB: -256}, "MemoryMB"},
		{cost.Params{Duration: -time.Millisecond}, "Duration"},
		{cost.Params{StateBytes: -1}, "StateBytes"},
		{cost.Params{MessageBytes: -1}, "MessageBytes"},
	} {
		tt.p.Input = in
		s, err := cost.Walk(plan, tt.p, nil)
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%+v: got %+v, %v; want an error naming %s", tt.p, s, err, tt.field)
		}
	}
	if _, err := cost.Walk(plan, cost.Params{Input: in}, nil); err != nil {
		t.Fatalf("zero figures take the defaults: %v", err)
	}
}

// The same walk gives the same figures to the last bit: the breakdown is a
// map, and adding its parts in map order made the total vary.
func TestWalkIsDeterministic(t *testing.T) {
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]any{"order_id": "o", "customer": "c", "amount": 1.0, "currency": "EUR", "card": "4242", "items": []any{"a"}}
	p := cost.Params{MemoryMB: 1769, Duration: 137 * time.Millisecond, StateBytes: 3333, BatchSize: 7, Input: in}
	first, err := cost.Walk(plan, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		s, err := cost.Walk(plan, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.CostLambdaSaga != first.CostLambdaSaga {
			t.Fatalf("total %v, then %v", first.CostLambdaSaga, s.CostLambdaSaga)
		}
	}
}
