package sqshandler_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/otelsaga"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

// BenchmarkHandlerTraced is BenchmarkHandler's batch of 10 with tracing
// on, every span sampled and exported (to an exporter that drops them)
// and flushed once a batch: what tracing costs a record beside the
// untraced pass.
func BenchmarkHandlerTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithIDGenerator(sqshandler.XRayIDs{}))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reg := engine.NewRegistry()
	reg.MustRegister("noop", func(context.Context, saga.Call) (any, error) { return nil, nil })
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: memstore.New(), Queue: sentNowhere{}, Actions: reg, Clock: clock,
		Rand: func() float64 { return 0.5 }, Tracer: otelsaga.New(tp), ChainSteps: -1})
	if err != nil {
		b.Fatal(err)
	}
	plan, err := saga.Compile("loop.yaml", []byte(loopSaga), saga.Options{MaxVisits: math.MaxInt})
	if err != nil {
		b.Fatal(err)
	}
	bp := &batchPass{}
	for i := range 10 {
		st, err := coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "bench-saga-" + string(rune('a'+i)), Input: map[string]any{"stop": false}})
		if err != nil {
			b.Fatal(err)
		}
		bp.msgs = append(bp.msgs, st.Outbox[0])
		bp.ev.Records = append(bp.ev.Records, events.SQSMessage{MessageId: "m" + string(rune('a'+i))})
	}
	if bp.h, err = sqshandler.New(sqshandler.Config{Coordinator: coord, Margin: time.Second, Traces: tp}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		bp.once(b)
	}
}
