package bench_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/accounting"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

// historyRun is what one saga cost, as DynamoDB bills it.
type historyRun struct {
	wru, index  float64 // billed write units on the saga's item, indexes included, and the indexes' share
	writes      int
	largestItem int // bytes, as DynamoDB sizes items
	entries     int // history entries kept
	dropped     uint64
}

// historyShape is a linear-10 saga as TestHistoryCost runs it.
type historyShape struct {
	name string
	fail string // the step whose action fails for good
	// bigOut: each action returns its idempotency key (50 bytes with a
	// 36-byte saga id) rather than a 6-byte id, which takes the item
	// without history to the edge of 1 KB
	bigOut bool
	// entries: the full history (a start, then per step its
	// completion and the next step's start, or the failure and per
	// compensation its start and end)
	entries int
	rule    bool // the 10% applies: a saga of small state
}

// TestHistoryCost measures what keeping a saga's history costs: a linear
// saga of 10 compensable action steps with small state and a 36-byte id,
// run on the emulators with its history and without it
// (saga.Options.HistoryBytes -1), every write billed as DynamoDB bills it
// (the accounting middleware, index writes included). The rule:
// the full history for at most 10% more billed write units. The same saga
// whose last step fails, compensating the other nine, is measured too,
// and one whose item without history is already near 1 KB, which the
// history takes past it (reported, not held to the rule).
func TestHistoryCost(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	ctx := context.Background()
	shapes := []historyShape{
		{name: "linear-10, succeeds", entries: 1 + 10 + 9, rule: true},
		{name: "linear-10, the last step fails", fail: "s9", entries: 1 + 9 + 9 + 1 + 2*9, rule: true},
		{name: "linear-10, succeeds, outputs of 50 bytes (an item near 1 KB)", bigOut: true, entries: 1 + 10 + 9},
	}
	for n, sh := range shapes {
		var runs [2]historyRun // without, with
		for i, opts := range []saga.Options{{HistoryBytes: -1}, {}} {
			runs[i] = runHistorySaga(t, b, ctx, opts, sh, fmt.Sprintf("%d%d", n, i))
		}
		off, on := runs[0], runs[1]
		ratio := on.wru / off.wru
		line := fmt.Sprintf("| %s | %.0f WRU (%.0f on indexes), largest item %d bytes | %.0f WRU (%.0f on indexes), largest item %d bytes, %d entries, none dropped | %.2f |",
			sh.name, off.wru, off.index, off.largestItem, on.wru, on.index, on.largestItem, on.entries, ratio)
		t.Log(line)
		if on.writes != off.writes {
			t.Errorf("%s: %d writes with the history, %d without: the history must add none", sh.name, on.writes, off.writes)
		}
		if on.dropped != 0 || on.entries != sh.entries {
			t.Errorf("%s: %d entries kept, %d dropped; want the full history, %d entries", sh.name, on.entries, on.dropped, sh.entries)
		}
		if sh.rule && ratio > 1.10 {
			t.Errorf("%s: the history costs %.0f%% more billed write units (%.0f against %.0f): over the 10%% the issue allows", sh.name, 100*(ratio-1), on.wru, off.wru)
		}
		if out := os.Getenv("BENCH_REPORT"); out != "" {
			appendLine(t, out, line)
		}
	}
}

// runHistorySaga runs one linear-10 saga to its end, the plan compiled
// with opts, on coordinators of its own (so that plans of the same hash
// do not mix), and bills its writes. Each action call moves the
// coordinator's clock 1.5 s, so that times and durations take the bytes
// they take in a real saga.
func runHistorySaga(t *testing.T, b *awstest.Backend, ctx context.Context, opts saga.Options, sh historyShape, tag string) historyRun {
	t.Helper()
	clock := durable.NewManualClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	reg := engine.NewRegistry()
	reg.MustRegister("work", func(ctx context.Context, c saga.Call) (any, error) {
		clock.Advance(1500 * time.Millisecond)
		if c.Step == sh.fail {
			return nil, saga.Permanent(saga.NewError("Declined", "the card was declined"))
		}
		if sh.bigOut {
			return map[string]any{"id": c.IdempotencyKey}, nil
		}
		return map[string]any{"id": "id-" + c.Step}, nil
	})
	reg.MustRegister("undo", func(context.Context, saga.Call) (any, error) {
		clock.Advance(1500 * time.Millisecond)
		return nil, nil
	})
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: b.Queue, Actions: reg, Clock: clock, Plans: engine.NewPlans(b.Store, opts)})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := saga.Compile("linear.yaml", []byte(sagatest.LinearSaga(10)), opts)
	if err != nil {
		t.Fatal(err)
	}
	// A first saga stores the definition; the second is measured.
	runLinear(t, b, ctx, coord, plan, "warm-"+tag)
	b.Counter.Reset()
	id := fmt.Sprintf("hist-%s-%029d", tag, 1) // 36 bytes, as a UUID
	largest := runLinear(t, b, ctx, coord, plan, id)
	var run historyRun
	for op, s := range b.Counter.Snapshot() {
		if s.Unbilled > 0 {
			t.Errorf("%s: %d calls unbilled", op, s.Unbilled)
		}
		run.wru += s.BilledWriteUnits
		run.index += s.BilledIndexWriteUnits
		if op == "DynamoDB.PutItem" || op == "DynamoDB.UpdateItem" {
			run.writes += s.Calls
		}
	}
	run.largestItem = largest
	st, err := coord.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := st.HistoryEntries(plan)
	if err != nil {
		t.Fatal(err)
	}
	run.entries, run.dropped = len(entries), st.HistoryDropped
	return run
}

// runLinear starts a saga and handles its messages on both queues until
// it ends, returning the size of its largest item.
func runLinear(t *testing.T, b *awstest.Backend, ctx context.Context, coord *engine.Coordinator, plan *saga.Plan, id string) int {
	t.Helper()
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: id}); err != nil {
		t.Fatal(err)
	}
	largest := 0
	for range 500 {
		handled := false
		for _, q := range durable.QueueNames() {
			ds, err := b.Queue.Receive(ctx, &durable.ReceiveParams{Queue: q, Max: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) == 0 {
				continue
			}
			handled = true
			if _, err := coord.Handle(ctx, ds[0].Body); err != nil {
				t.Fatal(err)
			}
			_ = b.Queue.Delete(ctx, &durable.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle})
			largest = max(largest, itemSize(t, b, ctx, id))
		}
		if !handled {
			st, err := coord.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status.Final() {
				return largest
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Fatalf("saga %s did not end", id)
	return 0
}

// itemSize reads the saga's item as it is stored (not counted: the
// counter's clients are the coordinator's) and sizes it as DynamoDB does.
func itemSize(t *testing.T, b *awstest.Backend, ctx context.Context, id string) int {
	t.Helper()
	raw := awslocal.DynamoDB(b.DynamoDBEndpoint)
	out, err := raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(b.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "SAGA#" + id}, "sk": &types.AttributeValueMemberS{Value: "STATE"}}})
	if err != nil {
		t.Fatal(err)
	}
	return accounting.ItemSize(out.Item)
}
