package bench_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga"
	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/cost"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/frontdoor"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

// TestChainedRequestEconomy measures what chains save (docs/COST.md,
// "Chained steps"): the order saga, linear-10, and the order saga where
// ship fails, run with the coordinator's default chains, every request
// from the start to the end counted and billed as AWS bills it (the
// accounting middleware), and compared with what cost.Walk prices with
// chains: the messages sent and handled, the reads, the writes and their
// units. Each saga runs once first, so that its definition is stored and
// known: the measured run is the saga's own requests.
func TestChainedRequestEconomy(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	ctx := context.Background()
	actions := lambdasaga.NewActions()
	order.NewServices().Register(actions)
	reg := frontdoor.Registry(actions)
	reg.MustRegister("work", func(ctx context.Context, c saga.Call) (any, error) {
		return map[string]any{"id": c.IdempotencyKey}, nil
	})
	reg.MustRegister("undo", func(context.Context, saga.Call) (any, error) { return nil, nil })
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: b.Queue, Actions: reg})
	if err != nil {
		t.Fatal(err)
	}
	orderPlan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	linear, err := saga.Compile("linear.yaml", []byte(sagatest.LinearSaga(10)), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// ship fails for good for order.Unshippable.
	orderIn := func(customer string) map[string]any {
		return map[string]any{"order_id": "o-1", "customer": customer, "amount": 42.5, "currency": "EUR", "card": "4242", "items": []any{"book", "lamp"}}
	}
	// run starts a saga and handles its messages, on both queues, until
	// none is left; it returns how many it handled.
	run := func(plan *saga.Plan, id string, in map[string]any) int {
		t.Helper()
		if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: id, Input: in}); err != nil {
			t.Fatal(err)
		}
		handled := 0
		for idle := false; !idle; {
			idle = true
			for _, q := range []durable.QueueName{durable.QueueAdvance, durable.QueueCompensate} {
				ds, err := b.Queue.Receive(ctx, &durable.ReceiveParams{Queue: q, Max: 10, Wait: 100 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					idle = false
					if _, err := coord.Handle(ctx, d.Body); err != nil {
						t.Fatal(err)
					}
					if err := b.Queue.Delete(ctx, &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle}); err != nil {
						t.Fatal(err)
					}
					handled++
				}
			}
		}
		return handled
	}
	for _, c := range []struct {
		name, id string
		plan     *saga.Plan
		in       map[string]any
		fail     func(saga.Call) bool
		end      durable.Status
	}{
		{"order", "order", orderPlan, orderIn("ada"), nil, durable.StatusSucceeded},
		{"linear-10", "linear", linear, nil, nil, durable.StatusSucceeded},
		{"order, ship fails", "unshippable", orderPlan, orderIn(order.Unshippable), func(c saga.Call) bool { return c.Step == "ship" && !c.Compensation }, durable.StatusCompensated},
	} {
		run(c.plan, "warm-"+c.id, c.in)
		b.Counter.Reset()
		handled := run(c.plan, "chain-"+c.id, c.in)
		got := billOf(t, b.Counter.Snapshot())
		st, err := coord.Get(ctx, "chain-"+c.id)
		if err != nil || st.Status != c.end {
			t.Fatalf("%s: %v %v, want %s", c.name, st.Status, err, c.end)
		}
		rec, err := b.Store.SagaGet(ctx, &durable.SagaGetParams{SagaID: "chain-" + c.id})
		if err != nil {
			t.Fatal(err)
		}
		// The model, at the state's measured size (its last version's:
		// the largest here).
		m, err := cost.Walk(c.plan, cost.Params{Input: c.in, StateBytes: len(rec.State)}, c.fail)
		if err != nil {
			t.Fatal(err)
		}
		sends := got.ops["SQS.SendMessage"] + got.ops["SQS.SendMessageBatch"]
		// A row of docs/COST.md's table: action steps, chained, messages
		// handled, sends, reads, writes, write units (on indexes), read units.
		t.Logf("| %s | %d | %d | %d | %d | %d | %d | %.0f (%.0f) | %.0f |", c.name, m.ActionSteps, m.ChainedSteps, handled, sends,
			got.ops["DynamoDB.GetItem"], got.ops["DynamoDB.PutItem"], got.wru(), got.byStatus+got.byDue, got.rru)
		t.Logf("%s: %s; model: %d messages, %d reads, %d writes, %g + %g WRU", c.name, got, m.Messages, m.DynamoReads, m.DynamoWrites, m.TableWRU, m.IndexWRU)
		for _, op := range slices.Sorted(maps.Keys(got.ops)) {
			switch op {
			case "DynamoDB.GetItem", "DynamoDB.PutItem", "SQS.SendMessage", "SQS.SendMessageBatch", "SQS.ReceiveMessage", "SQS.DeleteMessage":
			default:
				t.Errorf("%s: %d %s: a request the model does not price", c.name, got.ops[op], op)
			}
		}
		check := func(what string, measured, model float64) {
			t.Helper()
			if measured != model {
				t.Errorf("%s: %s measured %g, the model prices %g", c.name, what, measured, model)
			}
		}
		check("messages handled", float64(handled), float64(m.Messages))
		check("messages sent", float64(sends), float64(m.Messages))
		check("deletes", float64(got.ops["SQS.DeleteMessage"]), float64(m.Messages))
		check("reads", float64(got.ops["DynamoDB.GetItem"]), float64(m.DynamoReads))
		check("read units", got.rru, float64(m.DynamoReads)*m.RRUPerRead)
		check("writes", float64(got.ops["DynamoDB.PutItem"]), float64(m.DynamoWrites))
		check("write units on the table", got.table, m.TableWRU)
		check("write units on the indexes", got.byStatus+got.byDue, m.IndexWRU)
		if m.ChainedSteps+m.Messages != m.ActionSteps {
			t.Errorf("%s: %d chained and %d messages for %d action steps", c.name, m.ChainedSteps, m.Messages, m.ActionSteps)
		}
	}
}
