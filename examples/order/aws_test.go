package order_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/accounting"
	"github.com/lambdasaga/lambdasaga/embedded"
	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/queue/sqs"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// awsBackend is a fresh table and fresh queues on the emulators, with every
// request counted.
type awsBackend struct {
	store   *dynamo.Store
	queue   *sqs.Queue
	counter *accounting.Counter
}

func newAWSBackend(t *testing.T) *awsBackend {
	t.Helper()
	dynEP := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sqsEP := awslocal.Endpoint(t, awslocal.EnvSQS)
	counter := accounting.New()
	ddb := awslocal.DynamoDB(dynEP, counter.Register)
	sq := awslocal.SQS(sqsEP, counter.Register)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "order-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dynamo.CreateTable(ctx, ddb, name); err != nil {
		t.Fatal(err)
	}
	store, err := dynamo.New(dynamo.Config{Client: ddb, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	urls, err := sqs.CreateQueues(ctx, sq, sqs.QueueSpec{Prefix: name + "-", MaxReceiveCount: 3, Visibility: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	queue, err := sqs.New(sqs.Config{Client: sq, URLs: urls})
	if err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	return &awsBackend{store: store, queue: queue, counter: counter}
}

// TestOrderSagaOnEmulators runs the order saga through the coordinator on
// dynalite and fauxqs, with workers polling the queues.
func TestOrderSagaOnEmulators(t *testing.T) {
	plan, err := engine.Compile("order.yaml", order.Definition)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file    string
		status  engine.Status
		effects []string
	}{
		{"testdata/ok.json", engine.StatusSucceeded, []string{"reserve o-1001", "charge o-1001", "ship o-1001"}},
		{"testdata/declined.json", engine.StatusCompensated, []string{"reserve o-1002", "release o-1002"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			be := newAWSBackend(t)
			svc := order.NewServices()
			reg := engine.NewRegistry()
			svc.Register(reg)
			rt, err := embedded.Start(embedded.Config{Actions: reg, Store: be.store, Queue: be.queue, Receiver: be.queue, Visibility: 5 * time.Second, PollInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			st, err := rt.Run(ctx, &engine.StartParams{Plan: plan, SagaID: "e2e-1", Input: input(t, tt.file)})
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != tt.status || !slices.Equal(svc.Effects, tt.effects) {
				t.Fatalf("%s with effects %v, want %s with %v (failure %v)", st.Status, svc.Effects, tt.status, tt.effects, st.Failure)
			}
		})
	}
}

// TestRequestEconomyPerActionStep handles each message of the order saga by
// hand and counts its requests: at most one DynamoDB read, one write and one
// SQS send per action step.
func TestRequestEconomyPerActionStep(t *testing.T) {
	be := newAWSBackend(t)
	svc := order.NewServices()
	reg := engine.NewRegistry()
	svc.Register(reg)
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: be.store, Queue: be.queue, Actions: reg})
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := engine.Compile("order.yaml", order.Definition)
	ctx := context.Background()
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "econ-1", Input: input(t, "testdata/ok.json")}); err != nil {
		t.Fatal(err)
	}
	start := be.counter.Snapshot()
	if start["DynamoDB.PutItem"].Calls != 2 || start["SQS.SendMessage"].Calls != 1 {
		t.Fatalf("start: %+v (want the definition and the saga written, one message sent)", start)
	}
	var steps []string
	for range 10 {
		ds, err := be.queue.Receive(ctx, &engine.ReceiveParams{Queue: engine.QueueAdvance, Max: 1, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		msg, _ := engine.DecodeMessage(ds[0].Body)
		be.counter.Reset()
		if out, err := coord.Handle(ctx, ds[0].Body); err != nil || out != engine.HandledStep {
			t.Fatalf("handle %s: %s %v", msg.Step, out, err)
		}
		snap := be.counter.Snapshot()
		reads, writes, sends := snap["DynamoDB.GetItem"], snap["DynamoDB.PutItem"], snap["SQS.SendMessage"].Calls+snap["SQS.SendMessageBatch"].Calls
		t.Logf("step %-8s: %d read (%.1f RCU), %d write (%.1f WCU), %d send", msg.Step, reads.Calls, reads.ReadUnits, writes.Calls, writes.WriteUnits, sends)
		if reads.Calls > 1 || writes.Calls > 1 || sends > 1 || len(snap) > 3 {
			t.Fatalf("step %s: %+v: over one read, one write and one send", msg.Step, snap)
		}
		if writes.WriteUnits != 1 {
			t.Errorf("step %s wrote %.1f WCU, want 1 (state under 1 KB)", msg.Step, writes.WriteUnits)
		}
		steps = append(steps, msg.Step)
		_ = be.queue.Delete(ctx, &engine.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle})
	}
	if !slices.Equal(steps, []string{"reserve", "charge", "ship"}) {
		t.Fatalf("handled %v", steps)
	}
	st, _ := coord.Get(ctx, "econ-1")
	if st.Status != engine.StatusSucceeded {
		t.Fatalf("status %s", st.Status)
	}
}
