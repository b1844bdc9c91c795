package order_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/embedded"
	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/saga"
)

// TestOrderSagaOnEmulators runs the order saga through the coordinator on
// dynalite and fauxqs, with workers polling the queues.
func TestOrderSagaOnEmulators(t *testing.T) {
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file    string
		status  durable.Status
		effects []string
	}{
		{"testdata/ok.json", durable.StatusSucceeded, []string{"reserve o-1001", "charge o-1001", "ship o-1001"}},
		{"testdata/declined.json", durable.StatusCompensated, []string{"reserve o-1002", "release o-1002"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			be := awstest.New(t)
			svc := order.NewServices()
			reg := engine.NewRegistry()
			svc.Register(reg)
			rt, err := embedded.Start(embedded.Config{Actions: reg, Store: be.Store, Queue: be.Queue, Receiver: be.Queue, Visibility: 5 * time.Second, PollInterval: 20 * time.Millisecond})
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
	be := awstest.New(t)
	svc := order.NewServices()
	reg := engine.NewRegistry()
	svc.Register(reg)
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: be.Store, Queue: be.Queue, Actions: reg})
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := saga.Compile("order.yaml", order.Definition, saga.Options{})
	ctx := context.Background()
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "econ-1", Input: input(t, "testdata/ok.json")}); err != nil {
		t.Fatal(err)
	}
	start := be.Counter.Snapshot()
	if start["DynamoDB.PutItem"].Calls != 2 || start["SQS.SendMessage"].Calls != 1 {
		t.Fatalf("start: %+v (want the definition and the saga written, one message sent)", start)
	}
	var steps []string
	for range 10 {
		ds, err := be.Queue.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		msg, _ := durable.DecodeMessage(ds[0].Body)
		be.Counter.Reset()
		if out, err := coord.Handle(ctx, ds[0].Body); err != nil || out != engine.HandledStep {
			t.Fatalf("handle %s: %s %v", msg.Step, out, err)
		}
		snap := be.Counter.Snapshot()
		reads, writes, sends := snap["DynamoDB.GetItem"], snap["DynamoDB.PutItem"], snap["SQS.SendMessage"].Calls+snap["SQS.SendMessageBatch"].Calls
		t.Logf("step %-8s: %d read (%.1f RCU), %d write (%.1f WCU), %d send; as DynamoDB bills it: %.1f RRU, %.1f WRU of which %.1f on by_status",
			msg.Step, reads.Calls, reads.ReadUnits, writes.Calls, writes.WriteUnits, sends, reads.BilledReadUnits, writes.BilledWriteUnits, writes.BilledIndexWriteUnits)
		if reads.Calls > 1 || writes.Calls > 1 || sends > 1 || len(snap) > 3 {
			t.Fatalf("step %s: %+v: over one read, one write and one send", msg.Step, snap)
		}
		if writes.WriteUnits != 1 {
			t.Errorf("step %s wrote %.1f WCU on the table, want 1 (state under 1 KB)", msg.Step, writes.WriteUnits)
		}
		// As DynamoDB bills it: the by_status entry moves only when the
		// saga succeeds (ship's transition), a delete and a put.
		wantIndex := 0.0
		if msg.Step == "ship" {
			wantIndex = 2
		}
		if writes.BilledWriteUnits-writes.BilledIndexWriteUnits != 1 || writes.BilledIndexWriteUnits != wantIndex || writes.Unbilled != 0 {
			t.Errorf("step %s billed %.1f WRU of which %.1f on by_status (%d unbilled); want 1 on the table and %.0f on the index",
				msg.Step, writes.BilledWriteUnits, writes.BilledIndexWriteUnits, writes.Unbilled, wantIndex)
		}
		steps = append(steps, msg.Step)
		_ = be.Queue.Delete(ctx, &durable.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle})
	}
	if !slices.Equal(steps, []string{"reserve", "charge", "ship"}) {
		t.Fatalf("handled %v", steps)
	}
	st, _ := coord.Get(ctx, "econ-1")
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("status %s", st.Status)
	}
}
