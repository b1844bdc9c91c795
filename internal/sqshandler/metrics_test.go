package sqshandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/emf"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

// shopSaga reserves and charges; its compensations undo both.
const shopSaga = `
saga: shop
input: {id: string}
steps:
  - id: reserve
    action: inv.reserve
    compensate: {action: inv.release}
  - id: charge
    action: pay.charge
    retry: {attempts: 3, backoff: 1s}
    compensate: {action: pay.refund}
  - id: done
    succeed: {}
`

// metricsRig runs shop sagas on the memory store and queue behind a
// handler whose metrics go to out, on a manual clock that each action
// moves on, so that durations are exact.
type metricsRig struct {
	clock *durable.ManualClock
	store durable.Store
	q     *memqueue.Queue
	coord *engine.Coordinator
	h     *sqshandler.Handler
	out   bytes.Buffer
	plan  *saga.Plan
	// charge decides the charge of a saga: nil succeeds.
	charge map[string]error
	// release decides the release of a saga: nil succeeds.
	release map[string]error
	// during runs inside the reserve action, once.
	during func()
}

func newMetricsRig(t *testing.T, store durable.Store, q *memqueue.Queue, clock *durable.ManualClock) *metricsRig {
	t.Helper()
	r := &metricsRig{clock: clock, store: store, q: q, charge: map[string]error{}, release: map[string]error{}}
	reg := engine.NewRegistry()
	reg.MustRegister("inv.reserve", func(ctx context.Context, c saga.Call) (any, error) {
		if d := r.during; d != nil {
			r.during = nil
			d()
		}
		r.clock.Advance(250 * time.Millisecond)
		return map[string]any{}, nil
	})
	reg.MustRegister("pay.charge", func(ctx context.Context, c saga.Call) (any, error) {
		r.clock.Advance(100 * time.Millisecond)
		return map[string]any{}, r.charge[c.SagaID]
	})
	reg.MustRegister("inv.release", func(ctx context.Context, c saga.Call) (any, error) {
		r.clock.Advance(40 * time.Millisecond)
		return map[string]any{}, r.release[c.SagaID]
	})
	reg.MustRegister("pay.refund", func(ctx context.Context, c saga.Call) (any, error) { return map[string]any{}, nil })
	rec := emf.New(emf.Config{Out: &r.out, Function: "advance-fn", Now: clock.Now})
	var err error
	r.coord, err = engine.NewCoordinator(engine.CoordinatorConfig{Store: rec.Store(store), Queue: q, Actions: reg, Clock: clock, Rand: func() float64 { return 0.5 }, OnStep: rec.OnStep, ChainSteps: -1})
	if err != nil {
		t.Fatal(err)
	}
	if r.h, err = sqshandler.New(sqshandler.Config{Coordinator: r.coord, Margin: time.Second, Metrics: rec}); err != nil {
		t.Fatal(err)
	}
	if r.plan, err = saga.Compile("shop.yaml", []byte(shopSaga), saga.Options{}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *metricsRig) start(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: id, Input: map[string]any{"id": id}}); err != nil {
			t.Fatal(err)
		}
	}
}

// batch takes every message due on queue (moving the clock past retry
// delays) as one SQS event, with extra bodies after them.
func (r *metricsRig) batch(t *testing.T, queue durable.QueueName, extra ...string) events.SQSEvent {
	t.Helper()
	r.clock.Advance(time.Minute)
	ds, err := r.q.Receive(context.Background(), &durable.ReceiveParams{Queue: queue, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	for i, d := range ds {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i), Body: string(d.Body)})
		_ = r.q.Delete(context.Background(), &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle})
	}
	for i, b := range extra {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("x%d", i), Body: b})
	}
	return ev
}

// handle runs ev through the handler and returns the metric lines it wrote.
func (r *metricsRig) handle(t *testing.T, ev events.SQSEvent) []string {
	t.Helper()
	r.out.Reset()
	if _, err := r.h.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(r.out.String(), "\n")
	if last := lines[len(lines)-1]; last != "" {
		t.Fatalf("output does not end with a newline: %q", last)
	}
	lines = lines[:len(lines)-1]
	for _, l := range lines {
		checkEMF(t, l)
	}
	return lines
}

// checkEMF holds a line to the embedded metric format specification: one
// JSON object, whose _aws member has a Timestamp and directives whose
// dimensions are string members of the root and whose metrics are numbers
// or arrays of at most 100 numbers, at most 100 metrics a directive.
func checkEMF(t *testing.T, line string) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(line), &doc); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	var meta struct {
		Timestamp         *int64
		CloudWatchMetrics []struct {
			Namespace  string
			Dimensions [][]string
			Metrics    []struct{ Name, Unit string }
		}
	}
	raw, _ := json.Marshal(doc["_aws"])
	if err := json.Unmarshal(raw, &meta); err != nil || meta.Timestamp == nil || len(meta.CloudWatchMetrics) == 0 {
		t.Fatalf("%s: _aws %s: %v", line, raw, err)
	}
	for _, d := range meta.CloudWatchMetrics {
		if d.Namespace != emf.Namespace || len(d.Dimensions) == 0 || len(d.Metrics) == 0 || len(d.Metrics) > emf.MaxMetricsPerDirective {
			t.Fatalf("%s: directive %+v", line, d)
		}
		for _, set := range d.Dimensions {
			for _, k := range set {
				if v, ok := doc[k].(string); !ok || strings.TrimSpace(v) == "" {
					t.Fatalf("%s: dimension %s is %v, want a string that is not blank", line, k, doc[k])
				}
			}
		}
		for _, m := range d.Metrics {
			switch v := doc[m.Name].(type) {
			case float64:
			case []any:
				if len(v) == 0 || len(v) > emf.MaxValuesPerMetric {
					t.Fatalf("%s: metric %s has %d values", line, m.Name, len(v))
				}
			default:
				t.Fatalf("%s: metric %s is %v", line, m.Name, v)
			}
		}
	}
}

// A saga's whole life through the handler, batch by batch: the lines say
// exactly what each batch did, by function, by saga and by step.
func TestHandlerMetricsLines(t *testing.T) {
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	r := newMetricsRig(t, memstore.New(), memqueue.New(memqueue.Config{Clock: clock}), clock)
	r.start(t, "s-1", "s-2", "s-3", "s-4")
	r.charge["s-2"] = saga.Permanent(saga.NewError("CardDeclined", "no"))
	r.charge["s-3"] = saga.NewError("Unavailable", "later")
	r.charge["s-4"] = saga.Permanent(saga.NewError("CardDeclined", "no"))
	r.release["s-2"] = saga.Permanent(saga.NewError("Gone", "cannot release"))
	ts := func() string { return fmt.Sprint(clock.Now().UnixMilli()) }
	fn := func(handled, failed, malformed, conflicts int) string {
		return `{"_aws":{"Timestamp":` + ts() + `,"CloudWatchMetrics":[{"Namespace":"lambdasaga","Dimensions":[["Function"]],"Metrics":[` +
			`{"Name":"RecordsHandled","Unit":"Count"},{"Name":"RecordsFailed","Unit":"Count"},{"Name":"RecordsMalformed","Unit":"Count"},` +
			`{"Name":"RecordsHandedBack","Unit":"Count"},{"Name":"RequestsRefused","Unit":"Count"},{"Name":"WriteConflicts","Unit":"Count"}]}]},"Function":"advance-fn",` +
			fmt.Sprintf(`"RecordsHandled":%d,"RecordsFailed":%d,"RecordsMalformed":%d,"RecordsHandedBack":0,"RequestsRefused":0,"WriteConflicts":%d}`, handled, failed, malformed, conflicts) + "\n"
	}
	sagaLine := func(metric string, n int) string {
		return `{"_aws":{"Timestamp":` + ts() + `,"CloudWatchMetrics":[{"Namespace":"lambdasaga","Dimensions":[["SagaName"],[]],"Metrics":[` +
			`{"Name":"` + metric + `","Unit":"Count"}]}]},"SagaName":"shop","` + metric + `":` + fmt.Sprint(n) + "}\n"
	}
	stepLine := func(step string, counts [][2]any, durations string) string {
		var names, values []string
		for _, c := range counts {
			names = append(names, fmt.Sprintf(`{"Name":"%s","Unit":"Count"}`, c[0]))
			values = append(values, fmt.Sprintf(`"%s":%d`, c[0], c[1]))
		}
		names = append(names, `{"Name":"StepDuration","Unit":"Milliseconds"}`)
		values = append(values, `"StepDuration":[`+durations+`]`)
		return `{"_aws":{"Timestamp":` + ts() + `,"CloudWatchMetrics":[{"Namespace":"lambdasaga","Dimensions":[["SagaName","Step"],["SagaName"],[]],"Metrics":[` +
			strings.Join(names, ",") + `]}]},"SagaName":"shop","Step":"` + step + `",` + strings.Join(values, ",") + "}\n"
	}

	// Batch 1: the four reserves, and a body that is no message.
	ev := r.batch(t, durable.QueueAdvance, "not a message")
	assertLines(t, r.handle(t, ev),
		fn(4, 1, 1, 0),
		sagaLine("SagasStarted", 4),
		stepLine("reserve", [][2]any{{"StepCompleted", 4}}, "250,250,250,250"))

	// Batch 2: the charges. s-1 succeeds; s-2 and s-4 are declined and
	// compensate; s-3 will retry.
	ev = r.batch(t, durable.QueueAdvance)
	got := r.handle(t, ev)
	assertLines(t, got,
		fn(4, 0, 0, 0),
		sagaLine("SagasSucceeded", 1),
		stepLine("charge", [][2]any{{"StepCompleted", 1}, {"StepRetried", 1}, {"StepFailed", 2}}, "100,100,100,100"))

	// Batch 3: the releases. s-2's fails for good: it parks; s-4's
	// succeeds: it is compensated.
	ev = r.batch(t, durable.QueueCompensate)
	assertLines(t, r.handle(t, ev),
		fn(2, 0, 0, 0),
		// One saga line per batch and saga name, with the counts that are not zero.
		`{"_aws":{"Timestamp":`+ts()+`,"CloudWatchMetrics":[{"Namespace":"lambdasaga","Dimensions":[["SagaName"],[]],"Metrics":[`+
			`{"Name":"SagasCompensated","Unit":"Count"},{"Name":"SagasParked","Unit":"Count"}]}]},"SagaName":"shop","SagasCompensated":1,"SagasParked":1}`+"\n",
		stepLine("reserve/compensate", [][2]any{{"StepCompleted", 1}, {"StepFailed", 1}}, "40,40"))
	if st, _ := r.coord.Get(context.Background(), "s-2"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("s-2 is %s, want parked", st.Status)
	}
}

// assertLines fails unless got is want, line for line.
func assertLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Fatalf("metric lines:\n%s\nwant:\n%s", strings.Join(got, ""), strings.Join(want, ""))
	}
}

// Two coordinators race on one saga: while the first runs its action, the
// second handles a duplicate of the same message and writes first. The
// first's write loses its condition (a conflict), it reloads, finds the
// transition done and re-sends its outbox: its batch counts the record
// handled and the conflict, and no step, since its transition was never
// written. The winner's batch counts the step and the start.
func TestHandlerMetricsCountConflicts(t *testing.T) {
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	store, q := memstore.New(), memqueue.New(memqueue.Config{Clock: clock})
	a := newMetricsRig(t, store, q, clock)
	b := newMetricsRig(t, store, q, clock)
	a.start(t, "race-1")
	ev := a.batch(t, durable.QueueAdvance)
	var bLines []string
	a.during = func() { bLines = b.handle(t, ev) }
	aLines := a.handle(t, ev)

	var winner, loser struct {
		RecordsHandled, WriteConflicts, SagasStarted, StepCompleted *int
	}
	decode := func(lines []string, into any) {
		for _, l := range lines {
			if err := json.Unmarshal([]byte(l), into); err != nil {
				t.Fatal(err)
			}
		}
	}
	decode(bLines, &winner)
	decode(aLines, &loser)
	if len(bLines) != 3 || *winner.RecordsHandled != 1 || *winner.WriteConflicts != 0 || *winner.SagasStarted != 1 || *winner.StepCompleted != 1 {
		t.Fatalf("the winner's lines:\n%s", strings.Join(bLines, ""))
	}
	if len(aLines) != 1 || *loser.RecordsHandled != 1 || *loser.WriteConflicts != 1 || loser.SagasStarted != nil || loser.StepCompleted != nil {
		t.Fatalf("the loser's lines:\n%s", strings.Join(aLines, ""))
	}
	if st, _ := a.coord.Get(context.Background(), "race-1"); st.Version != 2 {
		t.Fatalf("saga at version %d, want 2: one transition", st.Version)
	}
}
