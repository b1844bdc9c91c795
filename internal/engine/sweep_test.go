package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// A saga whose message was never sent (a crash between the write and the
// send, and a caller that never retried) is picked up by a sweep, which
// re-sends the outbox of sagas idle for too long.
func TestSweepResendsStrandedSagas(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	r.queue.failSends.Store(1)
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: "stranded", Input: orderIn(10)}); err == nil {
		t.Fatal("start reported success without sending")
	}
	r.start("moving", orderIn(10))
	if r.q.Len(durable.QueueAdvance) != 1 {
		t.Fatalf("%d messages", r.q.Len(durable.QueueAdvance))
	}
	// Nothing is idle long enough yet: the sweep reads no saga at all.
	res, err := r.coord.Sweep(context.Background(), &engine.SweepParams{IdleFor: 10 * time.Minute})
	if err != nil || res.Resent != 0 || res.Checked != 0 {
		t.Fatalf("early sweep: %+v %v", res, err)
	}
	r.clock.Advance(11 * time.Minute)
	res, err = r.coord.Sweep(context.Background(), &engine.SweepParams{IdleFor: 10 * time.Minute})
	if err != nil || res.Resent != 2 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	r.drain()
	for _, id := range []string{"stranded", "moving"} {
		if st := r.get(id); st.Status != durable.StatusSucceeded {
			t.Fatalf("%s: %s", id, st.Status)
		}
	}
	// Finished sagas are left alone.
	res, _ = r.coord.Sweep(context.Background(), &engine.SweepParams{IdleFor: 0})
	if res.Resent != 0 {
		t.Fatalf("a sweep re-sent for finished sagas: %+v", res)
	}
}

// The sweep reads only the sagas that have been in their status for
// IdleFor, and re-sends only those of them not updated for as long: a saga
// that keeps moving is never re-sent, one that just started is not read.
func TestSweepReadsOnlySagasLongInTheirStatus(t *testing.T) {
	t.Parallel()
	r := newStepRig(t, "../saga/testdata/valid/order.yaml")
	r.start("old", orderIn(10))
	// "old" moves one step (keeping its status, running) just before the sweep.
	r.clock.Advance(25 * time.Minute)
	d, ok := r.receive()
	if !ok {
		t.Fatal("no message")
	}
	if _, err := r.coord.Handle(context.Background(), d.Body); err != nil {
		t.Fatal(err)
	}
	if st := r.get("old"); st.Status != durable.StatusRunning || !st.StatusSince.Equal(st.CreatedAt) {
		t.Fatalf("old: %s since %s, created %s: a step that keeps the status keeps StatusSince", st.Status, st.StatusSince, st.CreatedAt)
	}
	r.start("young", orderIn(10))
	res, err := r.coord.Sweep(context.Background(), &engine.SweepParams{IdleFor: 20 * time.Minute})
	if err != nil || res.Checked != 1 || res.Resent != 0 {
		t.Fatalf("sweep: %+v %v; want 1 checked (old, long running but moving), none re-sent, young not read", res, err)
	}
}

// A saga whose message keeps failing is re-sent MaxResends times per
// version, then left for an operator; progress starts the count again.
func TestSweepLeavesASagaForAnOperatorAfterMaxResends(t *testing.T) {
	t.Parallel()
	r := newStepRig(t, "../saga/testdata/valid/order.yaml")
	r.start("poison", orderIn(10))
	ctx := context.Background()
	sweep := func() *engine.SweepResult {
		t.Helper()
		r.clock.Advance(30 * time.Minute)
		res, err := r.coord.Sweep(ctx, &engine.SweepParams{IdleFor: 20 * time.Minute, MaxResends: 2})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for i := 1; i <= 2; i++ {
		if res := sweep(); res.Resent != 1 || res.LeftForOperator != 0 {
			t.Fatalf("sweep %d: %+v, want 1 re-sent", i, res)
		}
		if st := r.get("poison"); st.Resends != i {
			t.Fatalf("after sweep %d: Resends %d", i, st.Resends)
		}
	}
	before := r.q.Len(durable.QueueAdvance)
	if res := sweep(); res.Resent != 0 || res.LeftForOperator != 1 || res.Checked != 1 {
		t.Fatalf("third sweep: %+v, want the saga left for an operator", res)
	}
	if r.q.Len(durable.QueueAdvance) != before {
		t.Fatal("the third sweep sent a message")
	}
	// The operator redrives its message: the saga moves, the count clears.
	d, ok := r.receive()
	if !ok {
		t.Fatal("no message")
	}
	if _, err := r.coord.Handle(ctx, d.Body); err != nil {
		t.Fatal(err)
	}
	if st := r.get("poison"); st.Resends != 0 {
		t.Fatalf("after progress: Resends %d", st.Resends)
	}
	if res := sweep(); res.Resent != 1 {
		t.Fatalf("sweep after progress: %+v, want it re-sent again", res)
	}
	if _, err := r.coord.Sweep(ctx, &engine.SweepParams{MaxResends: -1}); err == nil || !strings.Contains(err.Error(), "MaxResends") {
		t.Fatalf("negative MaxResends: %v", err)
	}
}

// One saga that cannot be read does not stop the sweep: the sagas listed
// after it are still re-sent, and the error names the bad one.
func TestSweepGoesOnPastASagaItCannotRead(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	r.queue.failSends.Store(1)
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: "stranded", Input: orderIn(10)}); err == nil {
		t.Fatal("start reported success without sending")
	}
	r.clock.Advance(time.Minute)
	// A newer saga whose stored state does not decode, listed first.
	if err := r.store.SagaCreate(context.Background(), &durable.SagaCreateParams{Record: durable.SagaRecord{
		SagaID: "damaged", Version: 1, Status: durable.StatusRunning, Name: "order", DefinitionHash: r.plan.Hash(),
		CreatedAt: r.clock.Now(), StatusSince: r.clock.Now(), UpdatedAt: r.clock.Now(), State: []byte{0xff, 0xfe},
	}}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(30 * time.Minute)
	res, err := r.coord.Sweep(context.Background(), &engine.SweepParams{IdleFor: 20 * time.Minute})
	if err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("sweep error %v, want one naming the damaged saga", err)
	}
	if res.Resent != 1 || r.q.Len(durable.QueueAdvance) != 1 {
		t.Fatalf("resent %d, advance queue %d: the stranded saga behind the damaged one was not re-sent", res.Resent, r.q.Len(durable.QueueAdvance))
	}
}

// A send that fails gives its claim on a re-send back. A saga whose start
// lost its send (the case the sweep exists for) meets sweeps whose sends
// fail too (the same SQS trouble); it must not be left for an operator
// without ever having been re-sent: the remedy then (redrive the
// dead-letter queue) would have nothing to redrive.
func TestSweepAFailedSendDoesNotUseUpAResend(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	ctx := context.Background()
	r.queue.failSends.Store(1)
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: r.plan, SagaID: "lost", Input: orderIn(10)}); err == nil {
		t.Fatal("the start's send did not fail")
	}
	// Three sweeps meet the same trouble sending.
	for i := range 3 {
		r.clock.Advance(30 * time.Minute)
		r.queue.failSends.Store(1)
		if _, err := r.coord.Sweep(ctx, &engine.SweepParams{IdleFor: 20 * time.Minute}); err == nil {
			t.Fatalf("sweep %d: its send did not fail", i+1)
		}
	}
	if r.q.Len(durable.QueueAdvance) != 0 {
		t.Fatal("a message reached the queue")
	}
	// The queue works again: the saga, never re-sent, must be re-sent now.
	r.clock.Advance(30 * time.Minute)
	res, err := r.coord.Sweep(ctx, &engine.SweepParams{IdleFor: 20 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resent != 1 || res.LeftForOperator != 0 || r.q.Len(durable.QueueAdvance) != 1 {
		t.Fatalf("sweep once sends work again: %+v, %d messages queued, resends stored %d; want it re-sent: "+
			"it was left for an operator though no re-send ever reached a queue", res, r.q.Len(durable.QueueAdvance), r.get("lost").Resends)
	}
}

// barrierStore holds every SagaSetResends until n of them have arrived:
// n sweeps that each read the saga before any of them counted.
type barrierStore struct {
	durable.Store
	mu      sync.Mutex
	waiting int
	n       int
	release chan struct{}
}

func (s *barrierStore) SagaSetResends(ctx context.Context, p *durable.SagaSetResendsParams) error {
	s.mu.Lock()
	s.waiting++
	if s.waiting == s.n {
		close(s.release)
	}
	s.mu.Unlock()
	select {
	case <-s.release:
	case <-time.After(5 * time.Second): // the other sweep never came: go on alone
	}
	return s.Store.SagaSetResends(ctx, p)
}

// Two sweeps at once (the scheduled one and an operator's sagactl sweep,
// or a Lambda retry of a sweep that returned an error) re-send a saga at
// MaxResends-1 once between them: the claim is a compare-and-set of the
// count as read, not a condition on the version only, which both pass.
func TestConcurrentSweepsKeepMaxResends(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	ctx := context.Background()
	r.queue.failSends.Store(1)
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: r.plan, SagaID: "lost", Input: orderIn(10)}); err == nil {
		t.Fatal("the start's send did not fail")
	}
	r.clock.Advance(30 * time.Minute)
	bs := &barrierStore{Store: r.store, n: 2, release: make(chan struct{})}
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: bs, Queue: r.queue, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]*engine.SweepResult, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			results[i], errs[i] = coord.Sweep(ctx, &engine.SweepParams{IdleFor: 20 * time.Minute, MaxResends: 1})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	resent := results[0].Resent + results[1].Resent
	if resent > 1 || r.q.Len(durable.QueueAdvance) > 1 {
		t.Fatalf("two concurrent sweeps with MaxResends 1 re-sent %d times (%d messages queued, count stored %d): the cap was passed",
			resent, r.q.Len(durable.QueueAdvance), r.get("lost").Resends)
	}
}
