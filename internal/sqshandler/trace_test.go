package sqshandler_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/otelsaga"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

// The order saga, started inside a caller's span, run to its end through
// the functions' handler, each batch by a handler and coordinator of its
// own (a fresh invocation) wired as FromEnvironment wires them with
// tracing on: each batch's spans are exported before Handle returns (the
// provider batches them, and only the flush sends them), and every span
// of the saga is in the caller's trace.
func TestHandlerTracesOneSagaInOneTrace(t *testing.T) {
	exported := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exported), sdktrace.WithIDGenerator(sqshandler.XRayIDs{}))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	store, queue := memstore.New(), memqueue.New(memqueue.Config{})
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		return map[string]any{"order_id": "order-1001", "amount_cents": int64(4250)}, nil
	})
	newCoordinator := func() *engine.Coordinator {
		c, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: store, Queue: queue, Actions: reg, Tracer: otelsaga.New(tp), ChainSteps: -1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, caller := tp.Tracer("test").Start(context.Background(), "place order")
	if _, err := newCoordinator().Start(ctx, &engine.StartParams{Plan: plan, SagaID: "order-1001", Input: orderInput("order-1001")}); err != nil {
		t.Fatal(err)
	}
	caller.End()
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	batches := 0
	for ; batches < 20; batches++ {
		ds, err := queue.Receive(context.Background(), &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		var ev events.SQSEvent
		for i, d := range ds {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprint("m", batches, i), Body: string(d.Body), Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
			_ = queue.Delete(context.Background(), &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle})
		}
		h, err := sqshandler.New(sqshandler.Config{Coordinator: newCoordinator(), Traces: tp})
		if err != nil {
			t.Fatal(err)
		}
		before := len(exported.GetSpans())
		resp, err := h.Handle(context.Background(), ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("batch %d: %+v %v", batches, resp, err)
		}
		if got := len(exported.GetSpans()); got < before+2*len(ds) {
			t.Fatalf("batch %d of %d records: %d spans exported by the time Handle returned, want a step and an action span a record", batches, len(ds), got-before)
		}
	}
	st, err := newCoordinator().Get(context.Background(), "order-1001")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusSucceeded || batches < 3 {
		t.Fatalf("the saga is %s after %d batches; want succeeded after several", st.Status, batches)
	}
	want := caller.SpanContext().TraceID()
	steps := 0
	for _, s := range exported.GetSpans() {
		if s.Name == "place order" {
			continue
		}
		if s.SpanContext.TraceID() != want {
			t.Errorf("span %q in trace %s, not the caller's %s", s.Name, s.SpanContext.TraceID(), want)
		}
		if s.SpanKind == trace.SpanKindConsumer {
			steps++
		}
	}
	if steps != batches {
		t.Errorf("%d step spans for %d messages", steps, batches)
	}
}
