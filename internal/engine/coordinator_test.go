package engine_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func TestCoordinatorRunsSagaToTheEnd(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	st := r.start("o-1", orderIn(10))
	if st.Status != durable.StatusRunning || st.Version != 1 || r.queue.sent.Load() != 1 {
		t.Fatalf("after start: %s v%d sent %d", st.Status, st.Version, r.queue.sent.Load())
	}
	r.drain()
	st = r.get("o-1")
	if st.Status != durable.StatusSucceeded || st.Version != 3 {
		t.Fatalf("final: %s v%d", st.Status, st.Version)
	}
	var trace []string
	for _, ev := range r.events {
		trace = append(trace, ev.Step+":"+string(ev.Outcome)+"@v"+strconv.FormatUint(ev.Version, 10)+"/"+string(ev.Status))
		if ev.SagaName != "order" {
			t.Errorf("event %s %s: saga name %q, want order", ev.Step, ev.Outcome, ev.SagaName)
		}
	}
	// Every event of a transition carries the status it wrote.
	want := "reserve:started@v1/running reserve:completed@v2/running route:completed@v2/running charge:started@v2/running " +
		"charge:completed@v3/succeeded check:completed@v3/succeeded done:completed@v3/succeeded"
	if join(trace) != want {
		t.Fatalf("trace %s", join(trace))
	}
	res, err := r.coord.List(context.Background(), &durable.SagaListParams{Status: durable.StatusSucceeded})
	if err != nil || len(res.Sagas) != 1 || res.Sagas[0].SagaID != "o-1" {
		t.Fatalf("list %+v %v", res, err)
	}
}

func TestCoordinatorDropsStaleDuplicate(t *testing.T) {
	t.Parallel()
	r := newStepRig(t, "../saga/testdata/valid/order.yaml")
	r.start("o-1", orderIn(10))
	d, _ := r.receive()
	if out, err := r.coord.Handle(context.Background(), d.Body); err != nil || out != engine.HandledStep {
		t.Fatalf("first handling: %s %v", out, err)
	}
	r.drain() // the saga finishes: version 3
	sent := r.queue.sent.Load()
	out, err := r.coord.Handle(context.Background(), d.Body) // the version-1 message again
	if err != nil || out != engine.HandledStale {
		t.Fatalf("duplicate: %s %v, want stale", out, err)
	}
	if r.queue.sent.Load() != sent || r.get("o-1").Version != 3 {
		t.Fatal("a stale duplicate sent or wrote something")
	}
}

func TestCoordinatorResendsOutboxAfterCrashBeforeSend(t *testing.T) {
	t.Parallel()
	r := newStepRig(t, "../saga/testdata/valid/order.yaml")
	r.start("o-1", orderIn(10))
	d, _ := r.receive()
	r.queue.failSends.Store(1) // the write lands, the send fails: as if we crashed between them
	if _, err := r.coord.Handle(context.Background(), d.Body); err == nil {
		t.Fatal("handle reported success although its outbox was not sent")
	}
	if st := r.get("o-1"); st.Version != 2 || r.q.Len(durable.QueueAdvance) != 1 {
		t.Fatalf("after the failed send: v%d, %d messages", st.Version, r.q.Len(durable.QueueAdvance))
	}
	out, err := r.coord.Handle(context.Background(), d.Body) // redelivery of the same message
	if err != nil || out != engine.HandledResent {
		t.Fatalf("redelivery: %s %v, want resent", out, err)
	}
	r.clock.Advance(time.Minute) // let the unacknowledged original become visible: it is stale now
	r.drain()
	st := r.get("o-1")
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("final %s", st.Status)
	}
	r.calls.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n != 1 {
			t.Errorf("action %s ran %d times", k, n)
		}
		return true
	})
}

func TestCoordinatorConflictWithSecondWorker(t *testing.T) {
	t.Parallel()
	r := newStepRig(t, "../saga/testdata/valid/order.yaml")
	r.start("o-1", orderIn(10))
	d, _ := r.receive()
	// Just before our write, a second worker handles the same message and wins.
	r.store.beforeUpdate = func(*durable.SagaUpdateParams) {
		if out, err := r.coord.Handle(context.Background(), d.Body); err != nil || out != engine.HandledStep {
			t.Errorf("second worker: %s %v", out, err)
		}
	}
	out, err := r.coord.Handle(context.Background(), d.Body)
	if err != nil || out != engine.HandledResent {
		t.Fatalf("losing worker: %s %v, want resent after reload", out, err)
	}
	st := r.get("o-1")
	if st.Version != 2 {
		t.Fatalf("version %d: the loser wrote too", st.Version)
	}
	// Both ran the action, with one idempotency key: an idempotent service applies it once.
	n, _ := r.calls.Load("o-1/reserve/1")
	if n == nil || n.(*atomic.Int64).Load() != 2 {
		t.Fatalf("reserve calls under key o-1/reserve/1: %v", n)
	}
	r.drain()
	if st := r.get("o-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("final %s", st.Status)
	}
}

func TestCoordinatorPoisonMessages(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	r.start("o-1", orderIn(10))
	poison := [][]byte{
		[]byte("not json"),
		[]byte(`{"v":2,"saga_id":"o-1","version":1,"queue":"advance","step":"reserve","attempt":1}`),
		[]byte(`{"v":1,"saga_id":"nobody","version":1,"queue":"advance","step":"reserve","attempt":1}`),
		[]byte(`{"v":1,"saga_id":"o-1","version":1,"queue":"advance","step":"charge","attempt":1}`),
		[]byte(`{"v":1,"saga_id":"../etc","version":1,"queue":"advance","step":"x","attempt":1}`),
	}
	for _, body := range poison {
		if _, err := r.coord.Handle(context.Background(), body); !errors.Is(err, durable.ErrMalformedMessage) {
			t.Errorf("%s: %v, want ErrMalformedMessage", body, err)
		}
	}
	// Through the worker path, each poison message ends in the dead-letter
	// queue untouched. (The mismatched step is left out: once the saga moves
	// past version 1 it is merely a stale duplicate, and dropped.)
	poison = append(poison[:3:3], poison[4])
	for _, body := range poison {
		if err := r.q.SendBody(context.Background(), durable.QueueAdvance, body, 0); err != nil {
			t.Fatal(err)
		}
	}
	r.drain()
	dead := r.q.Bodies(durable.DeadLetter(durable.QueueAdvance))
	if len(dead) != len(poison) {
		t.Fatalf("dead-letter queue holds %d messages, want %d", len(dead), len(poison))
	}
	for i := range poison {
		if !bytes.Equal(dead[i], poison[i]) {
			t.Errorf("dead letter %d = %q, want %q", i, dead[i], poison[i])
		}
	}
	if st := r.get("o-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("the real saga: %s", st.Status)
	}
}

func TestCoordinatorStartIsIdempotent(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	r.queue.failSends.Store(1)
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: "o-1", Input: orderIn(10)}); err == nil {
		t.Fatal("start reported success without sending")
	}
	st := r.start("o-1", orderIn(10)) // again: same id and input
	if st.Version != 1 || r.q.Len(durable.QueueAdvance) != 1 {
		t.Fatalf("restart: v%d, %d messages", st.Version, r.q.Len(durable.QueueAdvance))
	}
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: "o-1", Input: orderIn(11)}); !errors.Is(err, durable.ErrExists) {
		t.Fatalf("different input: %v, want ErrExists", err)
	}
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: "bad id!", Input: orderIn(1)}); !errors.Is(err, saga.ErrInvalidInput) {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, Input: map[string]any{"amount": "x"}}); !errors.Is(err, saga.ErrInvalidInput) {
		t.Fatalf("bad input: %v", err)
	}
	r.drain()
	if st := r.get("o-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("final %s", st.Status)
	}
}

func TestCoordinatorActionBehaviours(t *testing.T) {
	t.Parallel()
	type receipt struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Cents  int    `json:"cents"`
	}
	tests := []struct {
		name    string
		charge  engine.ActionFunc
		status  durable.Status
		failure string
	}{
		{"struct output is stored as JSON values", func(ctx context.Context, c saga.Call) (any, error) {
			return receipt{ID: "p-1", Status: "captured", Cents: 1200}, nil
		}, durable.StatusSucceeded, ""},
		{"a panic is a retryable failure", func(ctx context.Context, c saga.Call) (any, error) {
			panic("boom")
		}, durable.StatusCompensated, "charge Error"},
		// The charge succeeded, so it must be refunded: a failed saga keeps
		// the output its refund reads when it fits the item...
		{"an output that grows the state too far fails the step and is compensated", func(ctx context.Context, c saga.Call) (any, error) {
			return map[string]any{"id": "p", "status": "captured", "blob": strings.Repeat("x", saga.MaxStateBytes)}, nil
		}, durable.StatusCompensated, "charge StateTooLarge"},
		// ...and when it cannot be kept at all, the saga parks for an
		// operator rather than report a compensation it did not do.
		{"an output too large to keep at all fails the step, and parks its compensation", func(ctx context.Context, c saga.Call) (any, error) {
			return map[string]any{"id": "p", "status": "captured", "blob": strings.Repeat("x", 2*saga.MaxStateBytes)}, nil
		}, durable.StatusCompensationFailed, "charge StateTooLarge"},
		{"an output that is not JSON-like fails the step, and parks its compensation", func(ctx context.Context, c saga.Call) (any, error) {
			return make(chan int), nil
		}, durable.StatusCompensationFailed, "charge InvalidOutput"},
		// (Its outcome unknown, compensating asks again under its key: the
		// third call answers.)
		{"a step timeout is a Timeout error", func(ctx context.Context, c saga.Call) (any, error) {
			if c.Attempt > 2 {
				return map[string]any{"id": "p"}, nil
			}
			<-ctx.Done()
			return nil, ctx.Err()
		}, durable.StatusCompensated, "charge Timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, "../saga/testdata/valid/order.yaml")
			r.reg.MustRegister("payments.charge", tt.charge)
			r.plan = mustCompile(t, strings.Replace(mustRead(t, "../saga/testdata/valid/order.yaml"), "    out: payment\n", "    out: payment\n    timeout: 10ms\n    retry: {attempts: 2, backoff: 1s}\n", 1))
			r.start("o-1", orderIn(10))
			r.drain()
			st := r.get("o-1")
			got := ""
			if st.Failure != nil {
				got = st.Failure.Step + " " + st.Failure.Type
			}
			if st.Status != tt.status || got != tt.failure {
				t.Fatalf("%s %q (%v), want %s %q", st.Status, got, st.Failure, tt.status, tt.failure)
			}
			if tt.status == durable.StatusCompensationFailed && (st.CompensationError == nil || st.CompensationError.Step != "charge" || !strings.Contains(st.CompensationError.Message, "undo it by hand")) {
				t.Fatalf("compensation error %+v, want the charge's refund, saying why", st.CompensationError)
			}
		})
	}
}

func TestCoordinatorCancelResumeAndStoredDefinitions(t *testing.T) {
	t.Parallel()
	r := newStepRig(t, "../saga/testdata/valid/order.yaml")
	failRelease := true
	r.reg.MustRegister("inventory.release", func(ctx context.Context, c saga.Call) (any, error) {
		if failRelease {
			return nil, saga.Permanent(errors.New("warehouse offline"))
		}
		return nil, nil
	})
	r.start("o-1", orderIn(10))
	d, _ := r.receive()
	engine.HandleDelivery(context.Background(), r.coord, r.q, d, nil) // reserve done
	if _, err := r.coord.Cancel(context.Background(), "o-1"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("o-1"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("after cancel: %s", st.Status)
	}
	// A fresh coordinator (another process) knows the definition only from the store.
	fresh, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: r.store, Queue: r.queue, Actions: r.reg, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	failRelease = false
	if _, err := fresh.Resume(context.Background(), "o-1"); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		d, ok := r.receive()
		if !ok {
			break
		}
		engine.HandleDelivery(context.Background(), fresh, r.q, d, nil)
	}
	if st := r.get("o-1"); st.Status != durable.StatusCompensated || st.Failure.Type != lang.ErrorTypeCancelled {
		t.Fatalf("after resume: %s %+v", st.Status, st.Failure)
	}
	if _, err := fresh.Cancel(context.Background(), "missing"); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("cancel of a missing saga: %v", err)
	}
}

// A resume (or cancel) whose write landed but whose send failed must be
// retryable: the retry re-sends the stored outbox instead of being refused.
func TestCoordinatorResumeAndCancelRetryAfterFailedSend(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"resume", "cancel"} {
		t.Run(op, func(t *testing.T) {
			r := newStepRig(t, "../saga/testdata/valid/order.yaml")
			failRelease := op == "resume"
			r.reg.MustRegister("inventory.release", func(ctx context.Context, c saga.Call) (any, error) {
				if failRelease {
					return nil, saga.Permanent(errors.New("warehouse offline"))
				}
				return nil, nil
			})
			r.start("o-1", orderIn(10))
			d, _ := r.receive()
			engine.HandleDelivery(context.Background(), r.coord, r.q, d, nil) // reserve done, charge pending
			act := r.coord.Cancel
			if op == "resume" {
				if _, err := r.coord.Cancel(context.Background(), "o-1"); err != nil {
					t.Fatal(err)
				}
				r.drain()
				if st := r.get("o-1"); st.Status != durable.StatusCompensationFailed {
					t.Fatalf("setup: %s", st.Status)
				}
				failRelease = false
				act = r.coord.Resume
			}
			r.queue.failSends.Store(1)
			if _, err := act(context.Background(), "o-1"); err == nil {
				t.Fatalf("%s reported success without sending", op)
			}
			if _, err := act(context.Background(), "o-1"); err != nil {
				t.Fatalf("%s retried: %v", op, err)
			}
			r.drain()
			if st := r.get("o-1"); st.Status != durable.StatusCompensated {
				t.Fatalf("after retried %s: %s", op, st.Status)
			}
		})
	}
}

// A coordinator without actions (a client, the sweep) starts and reads
// sagas, but leaves their messages for one that can run them.
func TestCoordinatorWithoutActionsLeavesMessages(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	bare, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: r.store, Queue: r.queue, Clock: r.clock})
	if err != nil {
		t.Fatalf("a coordinator without actions: %v", err)
	}
	st, err := bare.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: "o-1", Input: orderIn(10)})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := r.receive()
	if !ok {
		t.Fatal("start sent no message")
	}
	if _, err := bare.Handle(context.Background(), d.Body); !errors.Is(err, engine.ErrNoActions) {
		t.Fatalf("Handle without actions: %v, want ErrNoActions", err)
	}
	if got := r.get("o-1"); got.Version != st.Version {
		t.Fatalf("the saga moved from v%d to v%d", st.Version, got.Version)
	}
	if engine.HandleDelivery(context.Background(), bare, r.q, d, nil) {
		t.Fatal("the message was taken as done")
	}
	r.clock.Advance(time.Minute)
	r.drain() // the rig's own coordinator, which has actions, finishes it
	if got := r.get("o-1"); got.Status != durable.StatusSucceeded {
		t.Fatalf("status %s after the coordinator with actions took the message", got.Status)
	}
}

// A negative conflict bound would fail every Handle and Cancel; it is
// refused when the coordinator is built.
func TestNegativeConflictRetriesRefused(t *testing.T) {
	t.Parallel()
	_, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: memstore.New(), Queue: memqueue.New(memqueue.Config{}), MaxConflictRetries: -1})
	if err == nil || !strings.Contains(err.Error(), "MaxConflictRetries") {
		t.Fatalf("err %v, want MaxConflictRetries refused", err)
	}
}

// An id that cannot name a saga is refused before the store is asked.
func TestOperationsRefuseIDsThatCannotNameASaga(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	ctx := context.Background()
	for name, op := range map[string]func() error{
		"Get":    func() error { _, err := r.coord.Get(ctx, "a b"); return err },
		"Cancel": func() error { _, err := r.coord.Cancel(ctx, "a b"); return err },
		"Resume": func() error { _, err := r.coord.Resume(ctx, ""); return err },
	} {
		if err := op(); !errors.Is(err, saga.ErrInvalidInput) {
			t.Errorf("%s with a bad id: %v, want saga.ErrInvalidInput", name, err)
		}
	}
}

func TestRegistryRefusesNamesNoDefinitionCanCall(t *testing.T) {
	t.Parallel()
	reg := engine.NewRegistry()
	noop := func(context.Context, saga.Call) (any, error) { return nil, nil }
	for _, name := range []string{" ", "pay ments.charge", "lambda:fn", "1abc"} {
		if err := reg.Register(name, noop); err == nil {
			t.Errorf("Register(%q) accepted a name no definition can call", name)
		}
	}
	if err := reg.Register("payments.charge", noop); err != nil {
		t.Fatal(err)
	}
}

// A message whose version is 2^64-1 was taken as a stale duplicate (the
// coordinator adds one to it, which wrapped to 0) and deleted; it is
// malformed, so it fails and reaches the dead-letter queue.
func TestHandleRefusesImpossibleVersion(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	r.start("o-1", orderIn(10))
	body := durable.AppendMessage(nil, durable.Message{SagaID: "o-1", Version: 1<<64 - 1, Queue: durable.QueueAdvance, Step: "reserve", Attempt: 1})
	outcome, err := r.coord.Handle(context.Background(), body)
	if !errors.Is(err, durable.ErrMalformedMessage) {
		t.Fatalf("outcome %q, err %v: want ErrMalformedMessage", outcome, err)
	}
	if st := r.get("o-1"); st.Version != 1 {
		t.Fatalf("saga moved to v%d", st.Version)
	}
}

// A fork's message is not a step's: one that could never have been sent
// to this saga (ended or undo of a saga that is no child, a launch, which
// is never queued) is malformed; a join or a stop of a saga that waits on
// no fork is stale. None changes the saga or runs its action.
func TestHandleRefusesForkMessagesThatAreNotOurs(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	r.start("o-1", orderIn(10))
	for _, kind := range []durable.MessageKind{durable.KindEnded, durable.KindUndo, durable.KindLaunch} {
		body := durable.AppendMessage(nil, durable.Message{SagaID: "o-1", Version: 1, Queue: durable.QueueAdvance, Step: "reserve", Attempt: 1, Kind: kind})
		outcome, err := r.coord.Handle(context.Background(), body)
		if !errors.Is(err, durable.ErrMalformedMessage) {
			t.Fatalf("%s: outcome %q, err %v: want ErrMalformedMessage", kind, outcome, err)
		}
	}
	for _, kind := range []durable.MessageKind{durable.KindJoin, durable.KindStop} {
		body := durable.AppendMessage(nil, durable.Message{SagaID: "o-1", Version: 1, Queue: durable.QueueAdvance, Step: "reserve", Attempt: 1, Kind: kind})
		if outcome, err := r.coord.Handle(context.Background(), body); err != nil || outcome != engine.HandledStale {
			t.Fatalf("%s: outcome %q, err %v: want stale", kind, outcome, err)
		}
	}
	if st := r.get("o-1"); st.Version != 1 {
		t.Fatalf("saga moved to v%d", st.Version)
	}
}
