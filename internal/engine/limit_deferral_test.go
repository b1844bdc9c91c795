package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// countingLimiter counts the requests made to a store's limits.
type countingLimiter struct {
	durable.Limiter
	lists, takes, leases, releases atomic.Int64
}

func (l *countingLimiter) LimitList(ctx context.Context, p *durable.LimitListParams) ([]durable.Limit, error) {
	l.lists.Add(1)
	return l.Limiter.LimitList(ctx, p)
}

func (l *countingLimiter) LimitTake(ctx context.Context, p *durable.LimitTakeParams) error {
	l.takes.Add(1)
	return l.Limiter.LimitTake(ctx, p)
}

func (l *countingLimiter) LimitLease(ctx context.Context, p *durable.LimitLeaseParams) error {
	l.leases.Add(1)
	return l.Limiter.LimitLease(ctx, p)
}

func (l *countingLimiter) LimitRelease(ctx context.Context, p *durable.LimitReleaseParams) error {
	l.releases.Add(1)
	return l.Limiter.LimitRelease(ctx, p)
}

// newLimitRig runs src on the rig's memory store, which keeps limits
// (the rig's store wrapper alone would hide them), with act answering
// every action (nil: success).
func newLimitRig(t *testing.T, src string, chainSteps int, act func(ctx context.Context, c saga.Call) (any, error), limits ...durable.Limit) (*rig, *countingLimiter) {
	t.Helper()
	ms := memstore.New()
	r := newBareRig(t, byWorker, ms)
	r.plan = mustCompile(t, src)
	lim := &countingLimiter{Limiter: ms}
	for _, l := range limits {
		if err := ms.LimitPut(context.Background(), &durable.LimitPutParams{Limit: l}); err != nil {
			t.Fatal(err)
		}
	}
	r.reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		r.mu.Lock()
		r.invoked = append(r.invoked, c.Action)
		r.mu.Unlock()
		if act != nil {
			return act(ctx, c)
		}
		return map[string]any{"id": c.Step + "-1"}, nil
	})
	r.connect(engine.CoordinatorConfig{Rand: func() float64 { return 0.5 }, ChainSteps: chainSteps})
	cfg := r.cfg
	cfg.Store = struct {
		*rigStore
		durable.Limiter
	}{r.store, lim}
	c, err := engine.NewCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.coord = c
	return r, lim
}

const limitedSaga = `saga: limited
input: {}
timeout: 60s
steps:
  - id: prep
    action: svc.prep
  - id: pay
    action: svc.pay
    retry: {attempts: 1}
    compensate: {action: svc.refund}
  - id: ship
    action: svc.ship
`

// handleNext handles one message of the advance or compensate queue at
// the rig's clock (no clock move), returning its outcome; ok false when
// none is visible.
func handleNext(t *testing.T, r *rig) (engine.Outcome, durable.Message, bool) {
	t.Helper()
	ctx := context.Background()
	for _, qn := range durable.QueueNames() {
		ds, err := r.q.Receive(ctx, &durable.ReceiveParams{Queue: qn, Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			continue
		}
		msg, err := durable.DecodeMessage(ds[0].Body)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.coord.Handle(ctx, ds[0].Body)
		if err != nil {
			t.Fatalf("handle %s %s: %v", msg.SagaID, msg.Step, err)
		}
		if err := r.q.Delete(ctx, &durable.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		return out, msg, true
	}
	return "", durable.Message{}, false
}

// A call over its action's rate is deferred: its message comes again
// later, the saga is not written, no attempt is spent; within the window
// seen full, the process asks the store no more. Each one runs once in
// the end, at its first attempt.
func TestRateLimitDefersCallsWithoutSpendingAttempts(t *testing.T) {
	t.Parallel()
	r, lim := newLimitRig(t, limitedSaga, -1, nil, durable.Limit{Action: "svc.pay", Rate: 1, Burst: 1})
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		r.start(id, map[string]any{})
	}
	for range 3 { // each saga's prep
		if out, _, _ := handleNext(t, r); out != engine.HandledStep {
			t.Fatalf("prep: %s", out)
		}
	}
	var deferred []string
	for range 3 { // each saga's pay, in one window
		out, msg, ok := handleNext(t, r)
		if !ok || msg.Step != "pay" {
			t.Fatalf("expected a pay message, got %+v (%v)", msg, ok)
		}
		if out == engine.HandledDeferred {
			deferred = append(deferred, msg.SagaID)
			if st := r.get(msg.SagaID); st.Version != msg.Version {
				t.Fatalf("saga %s written by a deferral: version %d, message's %d", msg.SagaID, st.Version, msg.Version)
			}
		}
	}
	if len(deferred) != 2 {
		t.Fatalf("%d of 3 calls in a window of 1 deferred, want 2", len(deferred))
	}
	if lim.takes.Load() != 2 {
		t.Fatalf("%d counter writes, want 2: the window seen full costs no more", lim.takes.Load())
	}
	for {
		_, msg, ok := handleNext(t, r)
		if !ok {
			break
		}
		if msg.Step == "pay" {
			t.Fatalf("the deferred call of saga %s came back at once", msg.SagaID)
		}
	}
	for r.step() {
	}
	for _, id := range ids {
		st := r.get(id)
		if st.Status != durable.StatusSucceeded {
			t.Fatalf("saga %s: %s", id, st.Status)
		}
	}
	pays := 0
	for _, a := range r.invoked {
		if a == "svc.pay" {
			pays++
		}
	}
	if pays != 3 || len(r.errs) != 0 {
		t.Fatalf("svc.pay called %d times (want 3, one attempt each); errors %v", pays, r.errs)
	}
	if lim.lists.Load() > 1+int64(r.clock.Now().Sub(t0)/engine.LimitsTTL) {
		t.Fatalf("limits read %d times in %s", lim.lists.Load(), r.clock.Now().Sub(t0))
	}
}

// An action without a limit costs no request to the limits but their
// read, once per LimitsTTL.
func TestUnlimitedActionsCostNoLimitRequest(t *testing.T) {
	t.Parallel()
	r, lim := newLimitRig(t, limitedSaga, 0, nil, durable.Limit{Action: "other", Rate: 1})
	for _, id := range []string{"a", "b", "c", "d"} {
		r.start(id, map[string]any{})
	}
	for r.step() {
	}
	if n := lim.takes.Load() + lim.leases.Load() + lim.releases.Load(); n != 0 || lim.lists.Load() != 1 {
		t.Fatalf("%d writes and %d reads of limits for actions without one; want 0 and 1", n, lim.lists.Load())
	}
}

// A chain stops before a call over its limit: the steps before it are
// written, and its message is sent with the deferral's delay.
func TestChainStopsBeforeALimitedCall(t *testing.T) {
	t.Parallel()
	r, _ := newLimitRig(t, limitedSaga, 0, nil, durable.Limit{Action: "svc.ship", Rate: 1, Burst: 1})
	r.start("a", map[string]any{})
	r.start("b", map[string]any{})
	if out, _, _ := handleNext(t, r); out != engine.HandledStep {
		t.Fatalf("a: %s", out)
	}
	if st := r.get("a"); st.Status != durable.StatusSucceeded {
		t.Fatalf("saga a, alone in the window, chained to %s", st.Status)
	}
	if out, _, _ := handleNext(t, r); out != engine.HandledStep {
		t.Fatalf("b: %s", out)
	}
	st := r.get("b")
	if cur, ok := st.Pending(); !ok || st.Status != durable.StatusRunning || cur.Attempt != 1 {
		t.Fatalf("saga b: %s, pending %+v", st.Status, cur)
	}
	if _, msg, ok := handleNext(t, r); ok {
		t.Fatalf("the deferred ship came back at once: %+v", msg)
	}
	for r.step() {
	}
	if st := r.get("b"); st.Status != durable.StatusSucceeded {
		t.Fatalf("saga b: %s", st.Status)
	}
}

// Compensations call the same services: the limit of their action holds
// them too, and a deferred compensation spends no attempt.
func TestCompensationIsLimitedToo(t *testing.T) {
	t.Parallel()
	r, lim := newLimitRig(t, limitedSaga, -1, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Action == "svc.ship" {
			return nil, saga.Permanent(errors.New("no carrier"))
		}
		return map[string]any{"id": c.Step + "-1"}, nil
	}, durable.Limit{Action: "svc.refund", Rate: 1, Burst: 1})
	r.start("a", map[string]any{})
	r.start("b", map[string]any{})
	for r.step() {
	}
	for _, id := range []string{"a", "b"} {
		if st := r.get(id); st.Status != durable.StatusCompensated {
			t.Fatalf("saga %s: %s", id, st.Status)
		}
	}
	if lim.takes.Load() < 2 || len(r.errs) != 0 {
		t.Fatalf("refunds counted %d times; errors %v", lim.takes.Load(), r.errs)
	}
}

// A call deferred past its saga's deadline is not run there: the
// deadline fails its step as an attempt of unknown outcome (an earlier
// delivery may have run it), and the saga compensates, finding it out
// first under the same limit, once a slot is free.
func TestDeferredCallPastTheDeadlineFiresIt(t *testing.T) {
	t.Parallel()
	var r *rig
	var payAt []time.Duration
	r, _ = newLimitRig(t, limitedSaga, -1, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Action == "svc.pay" {
			payAt = append(payAt, r.clock.Now().Sub(t0))
		}
		return map[string]any{"id": c.Step + "-1"}, nil
	}, durable.Limit{Action: "svc.pay", Concurrency: 1})
	ms := r.store.Store.(*memstore.Store)
	// Another worker's call holds the only slot past the saga's deadline.
	if err := ms.LimitLease(context.Background(), &durable.LimitLeaseParams{Action: "svc.pay", Slot: 0, Holder: "x", Now: t0, Until: t0.Add(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	r.start("a", map[string]any{})
	for r.step() {
		if r.clock.Now().Sub(t0) > 30*time.Minute {
			t.Fatal("the saga never ends")
		}
	}
	st := r.get("a")
	if st.Status != durable.StatusCompensated || st.Failure == nil || !strings.Contains(st.Failure.Message, "over its concurrency limit until the saga's deadline") {
		t.Fatalf("saga a: %s, failure %+v; want compensated by its deadline", st.Status, st.Failure)
	}
	if len(payAt) != 1 || payAt[0] < 10*time.Minute {
		t.Fatalf("svc.pay called at %v; want once, to find out, after the slot was free", payAt)
	}
}

// Concurrency is leased: with one slot, two calls at once are one run and
// one deferred; the slot is released once the outcome is written.
func TestConcurrencyLimitLeasesASlot(t *testing.T) {
	t.Parallel()
	inside, leave := make(chan struct{}), make(chan struct{})
	r, lim := newLimitRig(t, limitedSaga, -1, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Action == "svc.pay" && c.SagaID == "a" {
			close(inside)
			<-leave
		}
		return map[string]any{"id": c.Step + "-1"}, nil
	}, durable.Limit{Action: "svc.pay", Concurrency: 1})
	r.start("a", map[string]any{})
	r.start("b", map[string]any{})
	handleNext(t, r)
	handleNext(t, r)
	var wg sync.WaitGroup
	var outA engine.Outcome
	wg.Go(func() { outA, _, _ = handleNext(t, r) }) // a's pay, first in the queue
	<-inside
	outB, msg, _ := handleNext(t, r)
	if outB != engine.HandledDeferred || msg.SagaID != "b" {
		t.Fatalf("b's pay while a's runs: %s (%s)", outB, msg.SagaID)
	}
	close(leave)
	wg.Wait()
	if outA != engine.HandledStep || lim.releases.Load() != 1 {
		t.Fatalf("a's pay: %s, %d releases", outA, lim.releases.Load())
	}
	for r.step() {
	}
	if st := r.get("b"); st.Status != durable.StatusSucceeded {
		t.Fatalf("saga b: %s", st.Status)
	}
}
