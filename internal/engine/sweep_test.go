package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// A send that fails gives its claim on a re-send back. A saga whose start
// lost its send (the case the sweep exists for) meets sweeps whose sends
// fail too (the same SQS trouble); it must not be left for an operator
// without ever having been re-sent: the remedy then (redrive the
// dead-letter queue) would have nothing to redrive.
func TestSweepAFailedSendDoesNotUseUpAResend(t *testing.T) {
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
