package bench_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// countedLimits counts the requests the workers make to the limits.
type countedLimits struct {
	*dynamo.Store
	lists, takes, takesDenied, leases, leasesDenied, releases atomic.Int64
}

func (s *countedLimits) LimitList(ctx context.Context, p *durable.LimitListParams) ([]durable.Limit, error) {
	s.lists.Add(1)
	return s.Store.LimitList(ctx, p)
}

func (s *countedLimits) LimitTake(ctx context.Context, p *durable.LimitTakeParams) error {
	err := s.Store.LimitTake(ctx, p)
	s.takes.Add(1)
	if errors.Is(err, durable.ErrLimited) {
		s.takesDenied.Add(1)
	}
	return err
}

func (s *countedLimits) LimitLease(ctx context.Context, p *durable.LimitLeaseParams) error {
	err := s.Store.LimitLease(ctx, p)
	s.leases.Add(1)
	if errors.Is(err, durable.ErrLimited) {
		s.leasesDenied.Add(1)
	}
	return err
}

func (s *countedLimits) LimitRelease(ctx context.Context, p *durable.LimitReleaseParams) error {
	s.releases.Add(1)
	return s.Store.LimitRelease(ctx, p)
}

// TestLimitHeldUnderLoad runs many one-step sagas whose action is
// limited through several processes (each an embedded runtime with its
// own coordinator, so its own cache of the limits, and two workers per
// queue) on dynalite and fauxqs, all started at once, and measures the
// calls: the most that start in any 1 s (sliding over every call's start)
// and the most in flight at once. Two loads: one the rate holds (short
// calls), one the concurrency holds (long calls).
//
// A rate of 20/s with a burst of 2 is windows of 100 ms, each counting at
// most 2 admissions, so any 1 s of admissions overlaps at most 11
// windows: 22 = rate + burst. A call starts a little after its admission
// (its input is built, the attempt traced), so a second of call starts
// may take one more window's: rate + 2*burst = 24 is the bound asserted.
// Concurrency is leased, exactly: at most 4 in flight, ever (no lease
// lapses: the calls are far shorter than their timeout).
func TestLimitHeldUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a load of limited calls on the emulators: not under -short")
	}
	limitLoad(t, durable.Limit{Action: "svc.call", Rate: 20, Burst: 2}, 20*time.Millisecond, 150)
	limitLoad(t, durable.Limit{Action: "svc.call", Concurrency: 4}, 250*time.Millisecond, 150)
}

func limitLoad(t *testing.T, limit durable.Limit, callTime time.Duration, sagas int) {
	const processes = 3
	b := awstest.New(t)
	store := &countedLimits{Store: b.Store}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := store.LimitPut(ctx, &durable.LimitPutParams{Limit: limit}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var starts []time.Time
	spent := 0
	var inFlight, maxInFlight atomic.Int64
	call := func(ctx context.Context, c saga.Call) (any, error) {
		n := inFlight.Add(1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		mu.Lock()
		starts = append(starts, time.Now())
		if c.Attempt > 1 {
			spent++ // a deferral spends no attempt
		}
		mu.Unlock()
		time.Sleep(callTime)
		inFlight.Add(-1)
		return map[string]any{"ok": true}, nil
	}
	plan, err := saga.Compile("limited.yaml", []byte("saga: limited\ninput: {}\nsteps:\n  - id: call\n    action: svc.call\n    timeout: 5s\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rts []*embedded.Runtime
	for range processes {
		reg := engine.NewRegistry()
		reg.MustRegister("svc.call", call)
		rt, err := embedded.Start(embedded.Config{Actions: reg, Store: store, Queue: b.Queue, Receiver: b.Queue, Workers: 2, Visibility: 30 * time.Second, PollInterval: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer rt.Close()
		rts = append(rts, rt)
	}
	began := time.Now()
	for i := range sagas {
		if _, err := rts[0].Coordinator.Start(ctx, &engine.StartParams{Plan: plan, SagaID: fmt.Sprintf("lim-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sagas {
		st, err := rts[0].Wait(ctx, fmt.Sprintf("lim-%d", i))
		if err != nil || st.Status != durable.StatusSucceeded {
			t.Fatalf("saga %d: %v %v", i, st, err)
		}
	}
	took := time.Since(began)
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != sagas || spent > 0 {
		t.Fatalf("%d calls for %d sagas, %d of them a second attempt or later", len(starts), sagas, spent)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	most, j := 0, 0
	for i := range starts {
		for starts[i].Sub(starts[j]) >= time.Second {
			j++
		}
		most = max(most, i-j+1)
	}
	calls := float64(sagas)
	bound := limit.Rate + 2*limit.Burst
	line := fmt.Sprintf("| %d/s burst %d, concurrency %d; calls of %s | %d sagas, %d processes x 2 workers | most started in 1 s: %d (bound %d) | most in flight: %d | %.1f calls/s | per call: %.2f counter writes (%.2f denied), %.2f lease writes (%.2f denied), %.2f releases | %d limit reads in %s |",
		limit.Rate, limit.Burst, limit.Concurrency, callTime, sagas, processes, most, bound, maxInFlight.Load(), calls/took.Seconds(),
		float64(store.takes.Load())/calls, float64(store.takesDenied.Load())/calls, float64(store.leases.Load())/calls, float64(store.leasesDenied.Load())/calls,
		float64(store.releases.Load())/calls, store.lists.Load(), took.Round(100*time.Millisecond))
	t.Log(line)
	report(t, line)
	if limit.Rate > 0 && most > bound {
		t.Errorf("%d calls started within 1 s under a limit of %d/s, burst %d (bound %d)", most, limit.Rate, limit.Burst, bound)
	}
	if limit.Concurrency > 0 && maxInFlight.Load() > int64(limit.Concurrency) {
		t.Errorf("%d calls in flight under a concurrency of %d", maxInFlight.Load(), limit.Concurrency)
	}
}
