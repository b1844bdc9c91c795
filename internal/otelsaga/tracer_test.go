package otelsaga_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/otelsaga"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

// trip books a hotel, then a flight (whose first attempt fails and is
// retried), then a car, which fails for good when the input says so: the
// flight and the hotel are then compensated, newest first.
const trip = `
saga: trip
input: {no_car: bool}
steps:
  - id: hotel
    action: hotel.book
    compensate: {action: hotel.cancel}
  - id: flight
    action: flight.book
    retry: {attempts: 3, backoff: 1ms}
    compensate: {action: flight.cancel}
  - id: car
    action: car.book
    with: {no_car: "${input.no_car}"}
`

type rig struct {
	t        *testing.T
	recorder *tracetest.SpanRecorder
	provider *sdktrace.TracerProvider
	store    *memstore.Store
	queue    *memqueue.Queue
	actions  *engine.Registry
	plan     *saga.Plan
	logs     *bytes.Buffer
	logMu    sync.Mutex
	// stepByStep: coordinators run every step in a message of its own
	// (no chains).
	stepByStep bool
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t, recorder: tracetest.NewSpanRecorder(), store: memstore.New(), queue: memqueue.New(memqueue.Config{}), logs: &bytes.Buffer{}}
	r.provider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.recorder))
	t.Cleanup(func() { _ = r.provider.Shutdown(context.Background()) })
	r.actions = engine.NewRegistry()
	var flightMu sync.Mutex
	flights := map[string]int{}
	ok := func(context.Context, saga.Call) (any, error) { return map[string]any{"ok": true}, nil }
	r.actions.MustRegister("hotel.book", ok)
	r.actions.MustRegister("hotel.cancel", ok)
	r.actions.MustRegister("flight.cancel", ok)
	r.actions.MustRegister("flight.book", func(_ context.Context, call saga.Call) (any, error) {
		flightMu.Lock()
		defer flightMu.Unlock()
		if flights[call.SagaID]++; flights[call.SagaID] == 1 {
			return nil, errors.New("flight service busy")
		}
		return map[string]any{"ok": true}, nil
	})
	r.actions.MustRegister("car.book", func(_ context.Context, call saga.Call) (any, error) {
		if in, _ := call.Input.(map[string]any); in["no_car"] == true {
			return nil, saga.Permanent(saga.NewError("NoCar", "no car left"))
		}
		return map[string]any{"ok": true}, nil
	})
	r.plan = sagatest.MustCompile(t, trip)
	return r
}

// coordinator is what one Lambda invocation builds: its own coordinator
// (no state shared with the others but the store and the queue), traced
// when traced is set.
func (r *rig) coordinator(traced bool) *engine.Coordinator {
	cfg := engine.CoordinatorConfig{Store: r.store, Queue: r.queue, Actions: r.actions,
		Logger: slog.New(otelsaga.LogHandler(slog.NewJSONHandler(lockedWriter{&r.logMu, r.logs}, nil)))}
	if traced {
		cfg.Tracer = otelsaga.New(r.provider)
	}
	if r.stepByStep {
		cfg.ChainSteps = -1
	}
	c, err := engine.NewCoordinator(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

// drain handles every message, one at a time, each by a fresh traced
// coordinator, until the queues are empty.
func (r *rig) drain() int {
	ctx := context.Background()
	handled := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		got := false
		for _, q := range []durable.QueueName{durable.QueueAdvance, durable.QueueCompensate} {
			ds, err := r.queue.Receive(ctx, &durable.ReceiveParams{Queue: q, Max: 1})
			if err != nil {
				r.t.Fatal(err)
			}
			for _, d := range ds {
				got = true
				if _, err := r.coordinator(true).Handle(ctx, d.Body); err != nil {
					r.t.Fatalf("handle: %v", err)
				}
				if err := r.queue.Delete(ctx, &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle}); err != nil {
					r.t.Fatal(err)
				}
				handled++
			}
		}
		if inFlight, next := r.queue.Pending(); !got && inFlight == 0 && next.IsZero() {
			return handled
		}
		if !got {
			time.Sleep(time.Millisecond) // a retry's backoff
		}
	}
	r.t.Fatal("the queues did not empty")
	return 0
}

func (r *rig) start(c *engine.Coordinator, ctx context.Context, id string, noCar bool) {
	if _, err := c.Start(ctx, &engine.StartParams{Plan: r.plan, SagaID: id, Input: map[string]any{"no_car": noCar}}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) status(id string) durable.Status {
	st, err := r.coordinator(false).Get(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return st.Status
}

// spansOf returns the ended spans of saga id, in the order they ended.
func (r *rig) spansOf(id string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.recorder.Ended() {
		if attr(s, otelsaga.AttrSagaID).AsString() == id {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	var v attribute.Value
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			v = kv.Value // the last one set: a version set at the end wins
		}
	}
	return v
}

// A saga started inside a caller's span, then handled message by message
// by a fresh coordinator each time, with a retry and two compensations:
// every span of it is in the caller's trace, a step span per message and
// an action span inside it per call, each with its attributes; a second
// saga, started outside any span, has a trace of its own.
func TestOneTracePerSagaAcrossInvocations(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.stepByStep = true // every step a message, each in an invocation of its own
	ctx, caller := r.provider.Tracer("test").Start(context.Background(), "checkout")
	r.start(r.coordinator(true), ctx, "t-1", true)
	caller.End()
	r.start(r.coordinator(true), context.Background(), "t-2", false)
	if n := r.drain(); n < 10 {
		t.Fatalf("%d messages handled; the two sagas need at least 10", n)
	}
	if st := r.status("t-1"); st != durable.StatusCompensated {
		t.Fatalf("t-1 is %s, want compensated", st)
	}
	if st := r.status("t-2"); st != durable.StatusSucceeded {
		t.Fatalf("t-2 is %s, want succeeded", st)
	}

	one, two := r.spansOf("t-1"), r.spansOf("t-2")
	want := caller.SpanContext().TraceID()
	for _, s := range one {
		if s.SpanContext().TraceID() != want {
			t.Errorf("span %q of t-1 is in trace %s, not the caller's %s", s.Name(), s.SpanContext().TraceID(), want)
		}
	}
	if len(two) == 0 || two[0].SpanContext().TraceID() == want {
		t.Fatalf("t-2 has %d spans, the first in the caller's trace: it was started outside it", len(two))
	}
	for _, s := range two {
		if s.SpanContext().TraceID() != two[0].SpanContext().TraceID() {
			t.Errorf("span %q of t-2 in trace %s, another of it in %s", s.Name(), s.SpanContext().TraceID(), two[0].SpanContext().TraceID())
		}
	}

	// What t-1 did, span by span: its start, a span per message with the
	// action's span inside it.
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range one {
		byID[s.SpanContext().SpanID()] = s
	}
	var steps, calls []string
	for _, s := range one {
		switch s.SpanKind() {
		case trace.SpanKindProducer:
			if s.Parent().SpanID() != caller.SpanContext().SpanID() {
				t.Errorf("t-1's start span is not the caller's child")
			}
		case trace.SpanKindConsumer:
			steps = append(steps, s.Name()+" #"+attr(s, otelsaga.AttrAttempt).String()+" "+attr(s, otelsaga.AttrOutcome).AsString())
			if attr(s, otelsaga.AttrSagaName).AsString() != "trip" || attr(s, otelsaga.AttrVersion).AsInt64() == 0 {
				t.Errorf("step span %q lacks its saga name or version: %v", s.Name(), s.Attributes())
			}
		case trace.SpanKindInternal:
			parent, ok := byID[s.Parent().SpanID()]
			if !ok || parent.SpanKind() != trace.SpanKindConsumer || attr(parent, otelsaga.AttrStep) != attr(s, otelsaga.AttrStep) {
				t.Errorf("action span %q is not inside its step's span", s.Name())
			}
			calls = append(calls, s.Name()+" "+attr(s, otelsaga.AttrOutcome).AsString()+" compensation="+attr(s, otelsaga.AttrCompensation).String())
			if s.Name() == "car.book" {
				if s.Status().Code != codes.Error || len(s.Events()) == 0 || attr(s, otelsaga.AttrErrorType).AsString() != "NoCar" {
					t.Errorf("car.book's failure is not recorded on its span: status %v, events %d, %v", s.Status(), len(s.Events()), s.Attributes())
				}
			}
		}
	}
	wantSteps := []string{
		"trip hotel #1 step", "trip flight #1 step", "trip flight #2 step", "trip car #1 step",
		"trip compensate flight #1 step", "trip compensate hotel #1 step",
	}
	wantCalls := []string{
		"hotel.book succeeded compensation=false", "flight.book failed compensation=false", "flight.book succeeded compensation=false",
		"car.book failed compensation=false", "flight.cancel succeeded compensation=true", "hotel.cancel succeeded compensation=true",
	}
	if !slices.Equal(steps, wantSteps) {
		t.Errorf("step spans of t-1:\n got %q\nwant %q", steps, wantSteps)
	}
	if !slices.Equal(calls, wantCalls) {
		t.Errorf("action spans of t-1:\n got %q\nwant %q", calls, wantCalls)
	}

	// The coordinators' log lines carry the trace.
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(r.logs.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		if l["msg"] != "message handled" || l["saga_id"] != "t-1" {
			continue
		}
		lines++
		if l["trace_id"] != want.String() || l["span_id"] == nil {
			t.Errorf("log line of t-1 with trace_id %v span_id %v; want trace %s", l["trace_id"], l["span_id"], want)
		}
	}
	if lines != len(wantSteps) {
		t.Errorf("%d message lines of t-1 logged, want %d", lines, len(wantSteps))
	}
}

// A saga started by a coordinator that does not trace (sagactl start, a
// client) takes the trace of the first span a traced coordinator opens
// for it, and keeps it in its state: its later messages join that trace.
func TestUntracedStartJoinsOneTrace(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.start(r.coordinator(false), context.Background(), "t-1", true)
	r.drain()
	spans := r.spansOf("t-1")
	if len(spans) < 12 {
		t.Fatalf("%d spans, want one per message and one per call", len(spans))
	}
	for _, s := range spans {
		if s.SpanContext().TraceID() != spans[0].SpanContext().TraceID() {
			t.Errorf("span %q in trace %s, the first in %s", s.Name(), s.SpanContext().TraceID(), spans[0].SpanContext().TraceID())
		}
	}
	st, err := r.coordinator(false).Get(context.Background(), "t-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Trace.IsZero() || st.Trace.TraceID != spans[0].SpanContext().TraceID() {
		t.Errorf("the saga keeps trace %x, its spans are in %s", st.Trace.TraceID, spans[0].SpanContext().TraceID())
	}
}

// The branches of a parallel step are child runs, sagas of their own:
// they take their parent's trace, so the whole tree is one trace.
func TestForkChildrenShareTheParentsTrace(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.plan = sagatest.MustCompile(t, `
saga: both
input: {no_car: bool}
steps:
  - id: book
    parallel:
      - steps:
          - {id: hotel, action: hotel.book, compensate: {action: hotel.cancel}}
      - steps:
          - {id: car, action: car.book, with: {no_car: "${input.no_car}"}}
`)
	r.start(r.coordinator(true), context.Background(), "p-1", true)
	r.drain()
	if st := r.status("p-1"); st != durable.StatusCompensated {
		t.Fatalf("p-1 is %s, want compensated", st)
	}
	var ids []string
	traces := map[trace.TraceID]bool{}
	for _, s := range r.recorder.Ended() {
		ids = append(ids, attr(s, otelsaga.AttrSagaID).AsString())
		traces[s.SpanContext().TraceID()] = true
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) != 3 || len(traces) != 1 {
		t.Errorf("spans of sagas %q in %d traces; want the parent and its two branches, in one", ids, len(traces))
	}
}
