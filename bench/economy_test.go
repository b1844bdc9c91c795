package bench_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga"
	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/accounting"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/frontdoor"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"

	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// stepCost is what handling one message cost.
type stepCost struct {
	step                 string
	reads, writes, sends int
	rru, wru             float64
	// billed: what DynamoDB would bill (accounting's Billed fields), index
	// writes included, which the emulators leave out of rru and wru
	billedRRU, billedWRU, billedIndex float64
	stateBytes                        int
	took                              time.Duration
}

// handleAll starts a saga and handles its messages one by one, counting
// each message's requests.
func handleAll(t *testing.T, b *awstest.Backend, coord *engine.Coordinator, plan *saga.Plan, id string, in map[string]any) (start stepCost, steps []stepCost) {
	t.Helper()
	ctx := context.Background()
	b.Counter.Reset()
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: id, Input: in}); err != nil {
		t.Fatal(err)
	}
	start = snapshot(b, "start")
	for range 100 {
		ds, err := b.Queue.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1, Wait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		msg, _ := durable.DecodeMessage(ds[0].Body)
		b.Counter.Reset()
		began := time.Now()
		out, err := coord.Handle(ctx, ds[0].Body)
		if err == nil && (out == engine.HandledResent || out == engine.HandledStale) {
			// A copy the queue delivered again (its visibility ran out on
			// a loaded machine): handled by the protocol, not a step.
			t.Logf("handle %s: a copy delivered again (%s), not counted", msg.Step, out)
			_ = b.Queue.Delete(ctx, &durable.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle})
			continue
		}
		if err != nil || out != engine.HandledStep {
			t.Fatalf("handle %s: %s %v", msg.Step, out, err)
		}
		c := snapshot(b, msg.Step)
		c.took = time.Since(began)
		rec, err := b.Store.SagaGet(ctx, &durable.SagaGetParams{SagaID: id})
		if err != nil {
			t.Fatal(err)
		}
		c.stateBytes = len(rec.State)
		steps = append(steps, c)
		_ = b.Queue.Delete(ctx, &durable.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle})
	}
	return start, steps
}

func snapshot(b *awstest.Backend, step string) stepCost {
	s := b.Counter.Snapshot()
	return stepCost{step: step, reads: s["DynamoDB.GetItem"].Calls, writes: s["DynamoDB.PutItem"].Calls,
		sends: s["SQS.SendMessage"].Calls + s["SQS.SendMessageBatch"].Calls,
		rru:   s["DynamoDB.GetItem"].ReadUnits, wru: s["DynamoDB.PutItem"].WriteUnits,
		billedRRU: s["DynamoDB.GetItem"].BilledReadUnits, billedWRU: s["DynamoDB.PutItem"].BilledWriteUnits, billedIndex: s["DynamoDB.PutItem"].BilledIndexWriteUnits}
}

// TestRequestEconomy asserts, for the order saga and a 10-step linear saga,
// at most one read, one write and one send per action step, one write unit
// on the table per transition for small states (the emulators leave out the
// by_status index's units, which the cost model adds by DynamoDB's rule),
// and prints the table in bench/README.md. Each step is a message of its
// own (chains off): TestChainedRequestEconomy measures chains.
// Not parallel: make bench prints its table, then TestPayloadSize's, for bench/README.md.
func TestRequestEconomy(t *testing.T) {
	b := awstest.New(t)
	b.Counter.Skip(accounting.EventualReads) // the pauses' and limits' caches: TestPauseEconomy, TestLimitRequestsAsBilled
	actions := lambdasaga.NewActions()
	order.NewServices().Register(actions)
	reg := frontdoor.Registry(actions)
	reg.MustRegister("work", func(ctx context.Context, c saga.Call) (any, error) {
		return map[string]any{"id": c.IdempotencyKey}, nil
	})
	reg.MustRegister("undo", func(context.Context, saga.Call) (any, error) { return nil, nil })
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: b.Queue, Actions: reg, ChainSteps: -1})
	if err != nil {
		t.Fatal(err)
	}
	orderPlan, _ := saga.Compile("order.yaml", order.Definition, saga.Options{})
	linear, err := saga.Compile("linear.yaml", []byte(sagatest.LinearSaga(10)), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orderIn := map[string]any{"order_id": "o-1", "customer": "ada", "amount": 42.5, "currency": "EUR", "card": "4242", "items": []any{"book", "lamp"}}
	for _, c := range []struct {
		name string
		plan *saga.Plan
		in   map[string]any
		n    int
	}{{"order", orderPlan, orderIn, 3}, {"linear-10", linear, nil, 10}} {
		start, steps := handleAll(t, b, coord, c.plan, "econ-"+c.name, c.in)
		if len(steps) != c.n {
			t.Fatalf("%s: %d steps handled, want %d", c.name, len(steps), c.n)
		}
		var reads, writes, sends int
		var wru, rru float64
		var billedRRU, billedWRU, billedIndex float64
		maxState := 0
		for _, s := range steps {
			if s.reads > 1 || s.writes > 1 || s.sends > 1 {
				t.Errorf("%s step %s: %d reads, %d writes, %d sends: over one each", c.name, s.step, s.reads, s.writes, s.sends)
			}
			if s.wru != 1 {
				t.Errorf("%s step %s: %.1f write units, want 1 for a %d-byte state", c.name, s.step, s.wru, s.stateBytes)
			}
			// DynamoDB bills the by_status index only when the status
			// changes: the last step (running -> succeeded) moves the
			// entry, a delete and a put; every other step leaves it.
			wantIndex := 0.0
			if s.step == steps[len(steps)-1].step {
				wantIndex = 2
			}
			if s.billedWRU-s.billedIndex != 1 || s.billedIndex != wantIndex {
				t.Errorf("%s step %s: billed %.1f WRU of which %.1f on the index, want 1 on the table and %.0f on the index", c.name, s.step, s.billedWRU, s.billedIndex, wantIndex)
			}
			billedRRU, billedWRU, billedIndex = billedRRU+s.billedRRU, billedWRU+s.billedWRU, billedIndex+s.billedIndex
			reads, writes, sends, wru, rru = reads+s.reads, writes+s.writes, sends+s.sends, wru+s.wru, rru+s.rru
			maxState = max(maxState, s.stateBytes)
		}
		line := fmt.Sprintf("| %s | %d | %d reads (%.0f RRU) | %d writes (%.0f WRU) | %d sends | per action step: %.2f / %.2f / %.2f | start: %d writes, %d send | largest state %d bytes |",
			c.name, c.n, reads, rru, writes+start.writes, wru+start.wru, sends+start.sends,
			float64(reads)/float64(c.n), float64(writes)/float64(c.n), float64(sends)/float64(c.n), start.writes, start.sends, maxState)
		t.Log(line)
		t.Logf("%s as DynamoDB bills it (index writes included): start %.0f WRU (%.0f on by_status); action steps %.0f WRU (%.0f on by_status), %.0f RRU",
			c.name, start.billedWRU, start.billedIndex, billedWRU, billedIndex, billedRRU)
		// On the saga's item: its create (1 on the table, 1 on the index:
		// the start's other write is the definition's) and every step.
		if start.billedIndex != 1 {
			t.Errorf("%s: the start billed %.0f index units, want 1 (a new entry)", c.name, start.billedIndex)
		}
		// Index: 1 at the create, 2 when the saga succeeds; table: one per
		// transition (the start and one per action step).
		onItem := 2 + billedWRU
		if want := float64(1+c.n) + 3; onItem != want {
			t.Errorf("%s: %.0f write units billed on the saga's item, want %.0f", c.name, onItem, want)
		}
		// The budget (bench/README.md) is for a 10-step saga of small state.
		if perStep := onItem / float64(c.n); c.n == 10 && perStep > 1.5 {
			t.Errorf("%s: %.2f write units billed per action step: over the budget of 1.5", c.name, perStep)
		}
		t.Logf("%s: %.0f write units billed on the saga's item (%.2f per action step)", c.name, onItem, onItem/float64(c.n))
		if out := os.Getenv("BENCH_REPORT"); out != "" {
			appendLine(t, out, line)
		}
	}
}

func appendLine(t *testing.T, file, line string) {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}
