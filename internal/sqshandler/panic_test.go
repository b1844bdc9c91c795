package sqshandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
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

// panickyStore panics when asked for one saga, as a bug or a damaged item
// would make any part of handling panic.
type panickyStore struct {
	durable.Store
	panicFor string
}

func (s *panickyStore) SagaGet(ctx context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	if p.SagaID == s.panicFor {
		panic("injected panic")
	}
	return s.Store.SagaGet(ctx, p)
}

// batchRig runs order sagas on the memory store behind a handler whose log
// is kept.
type batchRig struct {
	store *panickyStore
	coord *engine.Coordinator
	lh    lambda.Handler
	logs  bytes.Buffer
}

func newBatchRig(t *testing.T, ids ...string) *batchRig {
	t.Helper()
	r := &batchRig{store: &panickyStore{Store: memstore.New()}}
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		return map[string]any{"id": c.Step + "-1", "status": "captured"}, nil
	})
	var err error
	r.coord, err = engine.NewCoordinator(engine.CoordinatorConfig{Store: r.store, Queue: memqueue.New(memqueue.Config{}), Actions: reg, ChainSteps: -1})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: id, Input: orderInput(id)}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := sqshandler.New(sqshandler.Config{Coordinator: r.coord, Margin: time.Second, Logger: slogJSON(&r.logs)})
	if err != nil {
		t.Fatal(err)
	}
	r.lh = lambda.NewHandler(h.Handle)
	return r
}

// invoke sends one record per body (message ids m0, m1, ...) through the
// Lambda handler and returns the ids reported failed.
func (r *batchRig) invoke(t *testing.T, bodies ...string) []string {
	t.Helper()
	var ev events.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: "m" + string(rune('0'+i)), Body: b, Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	raw, _ := json.Marshal(ev)
	return invokeBatch(t, context.Background(), r.lh, raw)
}

func (r *batchRig) version(t *testing.T, id string) uint64 {
	t.Helper()
	st, err := r.coord.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st.Version
}

// logLines returns the handler's log records that mention sub.
func (r *batchRig) logLines(sub string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.logs.String()), "\n") {
		if !strings.Contains(line, sub) {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func body(id string, version uint64, queue durable.QueueName, step string) string {
	return string(durable.AppendMessage(nil, durable.Message{SagaID: id, Version: version, Queue: queue, Step: step, Attempt: 1}))
}

// A panic while handling one record fails that record alone: the others of
// the batch are handled, and the panic is logged with the saga's id.
func TestHandlerPanicFailsOnlyItsRecord(t *testing.T) {
	r := newBatchRig(t, "o-1", "o-2", "o-3")
	r.store.panicFor = "o-2"
	failed := r.invoke(t, body("o-1", 1, durable.QueueAdvance, "reserve"), body("o-2", 1, durable.QueueAdvance, "reserve"), body("o-3", 1, durable.QueueAdvance, "reserve"))
	if !slices.Equal(failed, []string{"m1"}) {
		t.Fatalf("failures %v, want only m1", failed)
	}
	if r.version(t, "o-1") != 2 || r.version(t, "o-3") != 2 {
		t.Fatal("a healthy record of the batch was not handled")
	}
	lines := r.logLines("panic")
	if len(lines) != 1 || lines[0]["level"] != "ERROR" || lines[0]["saga_id"] != "o-2" || lines[0]["message_id"] != "m1" {
		t.Fatalf("panic log %v", lines)
	}
}

// A damaged state item (a cursor past the plan) made the handler index out
// of range and take the whole batch down. It is now found when the state
// is loaded: that record alone fails, logged as poison.
func TestHandlerDamagedStateFailsOnlyItsRecord(t *testing.T) {
	r := newBatchRig(t, "o-1", "o-2", "o-3")
	ctx := context.Background()
	st, err := r.coord.Get(ctx, "o-2")
	if err != nil {
		t.Fatal(err)
	}
	st.Cursors[0].Step = 99
	st.Version = 2
	b, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := r.store.SagaGet(ctx, &durable.SagaGetParams{SagaID: "o-2"})
	rec.Version, rec.State = 2, b
	if err := r.store.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: *rec, ExpectedVersion: 1}); err != nil {
		t.Fatal(err)
	}
	failed := r.invoke(t, body("o-1", 1, durable.QueueAdvance, "reserve"), body("o-2", 2, durable.QueueAdvance, "reserve"), body("o-3", 1, durable.QueueAdvance, "reserve"))
	if !slices.Equal(failed, []string{"m1"}) {
		t.Fatalf("failures %v, want only m1", failed)
	}
	if r.version(t, "o-1") != 2 || r.version(t, "o-3") != 2 {
		t.Fatal("a healthy record of the batch was not handled")
	}
	if lines := r.logLines("poison"); len(lines) != 1 || lines[0]["saga_id"] != "o-2" || lines[0]["level"] != "ERROR" || !strings.Contains(lines[0]["error"].(string), "damaged") {
		t.Fatalf("poison log %v", lines)
	}
}

// Poison records (a saga that does not exist, a message for the wrong
// queue, a body that is no message) will never succeed: they are logged at
// ERROR as going to the dead-letter queue, never as "delivered again".
func TestHandlerLogsPoisonRecordsAsBoundForTheDeadLetterQueue(t *testing.T) {
	r := newBatchRig(t, "o-1")
	failed := r.invoke(t,
		body("nobody", 1, durable.QueueAdvance, "reserve"),
		body("o-1", 1, durable.QueueCompensate, "reserve"),
		"not a message",
		body("o-1", 1, durable.QueueAdvance, "reserve"),
	)
	if !slices.Equal(failed, []string{"m0", "m1", "m2"}) {
		t.Fatalf("failures %v", failed)
	}
	for _, id := range []string{"m0", "m1", "m2"} {
		lines := r.logLines(`"message_id":"` + id + `"`)
		if len(lines) != 1 {
			t.Fatalf("%s: log %v", id, lines)
		}
		msg, _ := lines[0]["msg"].(string)
		if lines[0]["level"] != "ERROR" || !strings.Contains(msg, "dead-letter queue after maxReceiveCount deliveries") || strings.Contains(msg, "delivered again") {
			t.Errorf("%s: logged %v %q", id, lines[0]["level"], msg)
		}
	}
}

func slogJSON(b *bytes.Buffer) *slog.Logger { return slog.New(slog.NewJSONHandler(b, nil)) }
