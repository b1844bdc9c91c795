package sqshandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

// fixture reads an event from infra/events: the same files sam local invoke uses.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../infra/events/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type rig struct {
	coord *engine.Coordinator
	queue *memqueue.Queue
	reg   *engine.Registry
	lh    lambda.Handler
}

// newRig starts saga order-1001 (the fixtures' saga) on the memory store,
// with reserve behaving as told.
func newRig(t *testing.T, reserve engine.ActionFunc) *rig {
	t.Helper()
	r := &rig{queue: memqueue.New(memqueue.Config{}), reg: engine.NewRegistry()}
	r.reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		return map[string]any{"order_id": "order-1001", "amount_cents": int64(4250)}, nil
	})
	if reserve != nil {
		r.reg.MustRegister("inventory.reserve", reserve)
	}
	var err error
	r.coord, err = engine.NewCoordinator(engine.CoordinatorConfig{Store: memstore.New(), Queue: r.queue, Actions: r.reg, ChainSteps: -1})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "order-1001", Input: orderInput("order-1001")}); err != nil {
		t.Fatal(err)
	}
	h, err := sqshandler.New(sqshandler.Config{Coordinator: r.coord, Margin: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r.lh = lambda.NewHandler(h.Handle)
	return r
}

func (r *rig) invoke(t *testing.T, ctx context.Context, event []byte) []string {
	t.Helper()
	return invokeBatch(t, ctx, r.lh, event)
}

// invokeBatch sends an SQS event through the Lambda handler, as Lambda
// does, and returns the ids of the records it reported failed.
func invokeBatch(t *testing.T, ctx context.Context, lh lambda.Handler, event []byte) []string {
	t.Helper()
	out, err := lh.Invoke(ctx, event)
	if err != nil {
		t.Fatalf("the invocation failed as a whole: %v", err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("response %s: %v", out, err)
	}
	failed := []string{}
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	return failed
}

// orderInput is an input of the order example for saga id.
func orderInput(id string) map[string]any {
	return map[string]any{"order_id": id, "customer": "ada", "amount": 42.5, "currency": "EUR", "card": "4242", "items": []any{"book"}}
}

func (r *rig) state(t *testing.T) *saga.State {
	st, err := r.coord.Get(context.Background(), "order-1001")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestHandlerSuccess(t *testing.T) {
	r := newRig(t, nil)
	if failed := r.invoke(t, context.Background(), fixture(t, "advance.json")); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	st := r.state(t)
	if st.Version != 2 || st.Status != durable.StatusRunning || r.queue.Len(durable.QueueAdvance) != 2 { // the start message and the charge message
		t.Fatalf("v%d %s, %d messages", st.Version, st.Status, r.queue.Len(durable.QueueAdvance))
	}
	// The same event again is a duplicate: it re-sends the outbox and succeeds.
	if failed := r.invoke(t, context.Background(), fixture(t, "advance.json")); len(failed) != 0 {
		t.Fatalf("duplicate: failures %v", failed)
	}
	if r.state(t).Version != 2 {
		t.Fatal("a duplicate wrote a new version")
	}
}

func TestHandlerRetry(t *testing.T) {
	r := newRig(t, func(context.Context, saga.Call) (any, error) {
		return nil, errors.New("inventory service unavailable")
	})
	if failed := r.invoke(t, context.Background(), fixture(t, "advance.json")); len(failed) != 0 {
		t.Fatalf("a retryable action error is a handled message (the retry is a new, delayed message): failures %v", failed)
	}
	st := r.state(t)
	cur, _ := st.Pending()
	if st.Status != durable.StatusRunning || cur.Attempt != 2 || st.Outbox[0].Delay == 0 {
		t.Fatalf("%s attempt %d outbox %+v", st.Status, cur.Attempt, st.Outbox)
	}
}

func TestHandlerPermanentFailure(t *testing.T) {
	r := newRig(t, func(context.Context, saga.Call) (any, error) {
		return nil, saga.Permanent(saga.NewError("OutOfStock", "none left"))
	})
	if failed := r.invoke(t, context.Background(), fixture(t, "advance.json")); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	st := r.state(t)
	if st.Status != durable.StatusCompensated || st.Failure.Type != "OutOfStock" {
		t.Fatalf("%s %+v", st.Status, st.Failure)
	}
}

func TestHandlerPoisonMessage(t *testing.T) {
	r := newRig(t, nil)
	failed := r.invoke(t, context.Background(), fixture(t, "advance-batch.json"))
	if !slices.Equal(failed, []string{"33333333-3333-4333-8333-333333333333"}) {
		t.Fatalf("failures %v, want only the poison record", failed)
	}
	if r.state(t).Version != 2 {
		t.Fatal("the good record of the batch was not handled")
	}
}

func TestHandlerDeadline(t *testing.T) {
	r := newRig(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond) // less than the 1s margin
	defer cancel()
	queued := r.queue.Len(durable.QueueAdvance)
	failed := r.invoke(t, ctx, fixture(t, "advance-batch.json"))
	// With no time left, the good record is handed back by sending it again
	// (no receive spent toward the dead-letter queue); the poison one fails.
	if !slices.Equal(failed, []string{"33333333-3333-4333-8333-333333333333"}) {
		t.Fatalf("failures %v, want only the poison record", failed)
	}
	if r.queue.Len(durable.QueueAdvance) != queued+1 {
		t.Fatalf("%d messages queued, want the handed-back one more than %d", r.queue.Len(durable.QueueAdvance), queued)
	}
	if r.state(t).Version != 1 {
		t.Fatal("a record was handled past the deadline margin")
	}
}

// The compensate fixture expects version 3; this saga is at version 1. A
// message ahead of its saga is never dropped: it fails, comes back, and
// reaches the dead-letter queue if the saga never catches up.
func TestHandlerMessageAheadOfSaga(t *testing.T) {
	r := newRig(t, nil)
	if failed := r.invoke(t, context.Background(), fixture(t, "compensate.json")); len(failed) != 1 {
		t.Fatalf("failures %v, want the record back", failed)
	}
	if r.state(t).Version != 1 {
		t.Fatal("state changed")
	}
}

// A fresh invocation shorter than the margin (Lambda's default 3 s timeout
// against the default 3 s margin) still runs its first record: handing it
// back would hand it back in every invocation, forever, without ever
// spending a receive toward the dead-letter queue.
func TestFreshInvocationUnderTheMarginRunsItsFirstRecord(t *testing.T) {
	r := newRig(t, nil)
	h, err := sqshandler.New(sqshandler.Config{Coordinator: r.coord}) // DefaultMargin
	if err != nil {
		t.Fatal(err)
	}
	r.lh = lambda.NewHandler(h.Handle)
	ctx, cancel := context.WithTimeout(context.Background(), 2900*time.Millisecond)
	defer cancel()
	if failed := r.invoke(t, ctx, fixture(t, "advance.json")); len(failed) != 0 {
		t.Fatalf("failed %v", failed)
	}
	if v := r.state(t).Version; v != 2 {
		t.Fatalf("saga at version %d after a fresh invocation, want 2: its record was handed back instead of run", v)
	}
}

func TestFromEnvironmentNeedsARegistry(t *testing.T) {
	if _, err := sqshandler.FromEnvironment(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "registry") {
		t.Fatalf("err %v, want a nil registry refused", err)
	}
}

// The chain's budgets come from the environment; a value that is not one
// is refused, naming the variable.
func TestFromEnvironmentRefusesBadChainBudgets(t *testing.T) {
	for _, tt := range []struct{ name, value string }{
		{sqshandler.EnvChainSteps, "-1"},
		{sqshandler.EnvChainSteps, "many"},
		{sqshandler.EnvChainTime, "-1s"},
		{sqshandler.EnvChainTime, "5"},
	} {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Setenv(sqshandler.EnvTable, "t")
			t.Setenv(sqshandler.EnvAdvanceQueueURL, "http://127.0.0.1:1/advance")
			t.Setenv(sqshandler.EnvCompensateQueueURL, "http://127.0.0.1:1/compensate")
			t.Setenv(tt.name, tt.value)
			_, err := sqshandler.FromEnvironment(context.Background(), engine.NewRegistry())
			if err == nil || !strings.Contains(err.Error(), tt.name) || !strings.Contains(err.Error(), tt.value) {
				t.Fatalf("err %v, want %s=%q refused by name", err, tt.name, tt.value)
			}
		})
	}
}

// LAMBDASAGA_BUCKET turns on large values by reference; a threshold that
// is not a positive number of bytes is refused, naming the variable.
func TestFromEnvironmentReadsTheBucket(t *testing.T) {
	for _, tt := range []struct {
		offload string
		ok      bool
	}{{"", true}, {"16384", true}, {"0", false}, {"64KiB", false}} {
		t.Run("offload="+tt.offload, func(t *testing.T) {
			t.Setenv(sqshandler.EnvTable, "t")
			t.Setenv(sqshandler.EnvAdvanceQueueURL, "http://127.0.0.1:1/advance")
			t.Setenv(sqshandler.EnvCompensateQueueURL, "http://127.0.0.1:1/compensate")
			t.Setenv("AWS_REGION", "us-east-1")
			t.Setenv(sqshandler.EnvBucket, "sagas")
			t.Setenv(sqshandler.EnvOffloadBytes, tt.offload)
			_, err := sqshandler.FromEnvironment(context.Background(), engine.NewRegistry())
			if tt.ok && err != nil {
				t.Fatal(err)
			}
			if !tt.ok && (err == nil || !strings.Contains(err.Error(), sqshandler.EnvOffloadBytes)) {
				t.Fatalf("err %v, want %s=%q refused by name", err, sqshandler.EnvOffloadBytes, tt.offload)
			}
		})
	}
}
