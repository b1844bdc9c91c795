package sqshandler_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/emf"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

// loopSaga runs one action per message forever, as the engine's
// benchmark does: every record of a batch is one action step.
const loopSaga = `
saga: loop
input: {stop: bool}
steps:
  - id: work
    action: noop
  - id: again
    switch:
      - {if: "input.stop", next: finish}
      - {default: work}
  - id: finish
    succeed: {}
`

// batchPass is a batch of records, one per saga, on the memory store,
// handled through Handler.Handle again and again: each pass
// decodes the records, and for each loads the saga, runs the action,
// advances, writes and sends the next message.
type batchPass struct {
	h    *sqshandler.Handler
	msgs []durable.Message
	ev   events.SQSEvent
	body []byte
}

func newBatchPass(tb testing.TB, sagas int, metrics bool) *batchPass {
	tb.Helper()
	reg := engine.NewRegistry()
	reg.MustRegister("noop", func(context.Context, saga.Call) (any, error) { return nil, nil })
	bp := &batchPass{}
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	cfg := engine.CoordinatorConfig{Store: memstore.New(), Queue: sentNowhere{}, Actions: reg, Clock: clock, Rand: func() float64 { return 0.5 }, ChainSteps: -1}
	hcfg := sqshandler.Config{Margin: time.Second}
	if metrics {
		enableMetrics(&cfg, &hcfg)
	}
	coord, err := engine.NewCoordinator(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	plan, err := saga.Compile("loop.yaml", []byte(loopSaga), saga.Options{MaxVisits: math.MaxInt})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range sagas {
		st, err := coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: fmt.Sprintf("bench-saga-%04d", i), Input: map[string]any{"stop": false}})
		if err != nil {
			tb.Fatal(err)
		}
		bp.msgs = append(bp.msgs, st.Outbox[0])
		bp.ev.Records = append(bp.ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i)})
	}
	hcfg.Coordinator = coord
	if bp.h, err = sqshandler.New(hcfg); err != nil {
		tb.Fatal(err)
	}
	return bp
}

func (bp *batchPass) once(tb testing.TB) {
	for i := range bp.msgs {
		bp.body = durable.AppendMessage(bp.body[:0], bp.msgs[i])
		bp.ev.Records[i].Body = string(bp.body)
		bp.msgs[i].Version++
	}
	resp, err := bp.h.Handle(context.Background(), bp.ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		tb.Fatalf("handle: %+v %v", resp, err)
	}
}

// sentNowhere is a queue that drops what is sent: each pass makes its
// messages itself, and a queue that keeps them would grow and blur the
// allocation counts.
type sentNowhere struct{ durable.Queue }

func (sentNowhere) Send(context.Context, []durable.Message) error { return nil }

// BenchmarkHandler handles batches of 10 records (one action step each),
// with and without metrics: allocs/op divided by 10 is per record.
func BenchmarkHandler(b *testing.B) {
	for _, metrics := range []bool{false, true} {
		b.Run(fmt.Sprintf("batch10/metrics=%v", metrics), func(b *testing.B) {
			bp := newBatchPass(b, 10, metrics)
			b.ReportAllocs()
			for b.Loop() {
				bp.once(b)
			}
		})
	}
}

// enableMetrics wires a Recorder, writing to io.Discard, as FromEnvironment does.
func enableMetrics(cfg *engine.CoordinatorConfig, hcfg *sqshandler.Config) {
	rec := emf.New(emf.Config{Out: io.Discard, Function: "bench", MemoryMB: 256})
	cfg.Store, cfg.OnStep, cfg.Queue = rec.Store(cfg.Store), rec.OnStep, rec.Queue(cfg.Queue)
	hcfg.Metrics = rec
}

// TestHandlerAllocs pins the allocations of a batch of 10 records, one
// action step each, without metrics and with them.
// The difference, 4 a record, is the coordinator's OnStep machinery (the
// held events of a transition, its observer, the step's timing); the
// Recorder itself allocates nothing once its tables have grown. One a
// record is the copy of the saga's history as its state is decoded; 2 a
// batch tell the coordinator of the batch (engine.WithBatch).
func TestHandlerAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	for _, c := range []struct {
		metrics bool
		pinned  float64
	}{{false, 213}, {true, 253}} {
		bp := newBatchPass(t, 10, c.metrics)
		for range 3 { // the Recorder's tables and the pools warm up
			bp.once(t)
		}
		got := testing.AllocsPerRun(100, func() { bp.once(t) })
		if got != c.pinned {
			t.Errorf("batch of 10, metrics %v: %v allocations, pinned at %v: update the pin if this is intended", c.metrics, got, c.pinned)
		}
	}
}
