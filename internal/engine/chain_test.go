package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// linearSaga is ten action steps, each compensated, and a switch between
// two of them (a pure step runs inside the transition, as always).
func linearSaga(extra string) string {
	var b strings.Builder
	b.WriteString("saga: linear\nsteps:\n")
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "  - id: s%d\n    action: a.s%d\n    compensate: {action: a.undo%d}\n", i, i, i)
		if i == 5 {
			b.WriteString("  - id: mid\n    switch:\n      - {default: s6}\n")
		}
	}
	b.WriteString(extra)
	return b.String()
}

// killable makes the rig's worker mortal: once the flag it returns is
// set, every store call and send fails, as for a worker that died.
func killable(e *rig) *atomic.Bool {
	dead := new(atomic.Bool)
	e.store.setHook(func(op, key string) error {
		if dead.Load() {
			return errors.New("the worker is gone")
		}
		return nil
	})
	e.queue.setHook(func(durable.Message) (bool, error) {
		if dead.Load() {
			return false, errors.New("the worker is gone")
		}
		return false, nil
	})
	return dead
}

// countingStore counts the reads of the saga's item.
type countingStore struct {
	durable.Store
	gets atomic.Int64
}

func (s *countingStore) SagaGet(ctx context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	s.gets.Add(1)
	return s.Store.SagaGet(ctx, p)
}

// A ready step runs in the message of the step before it: ten action
// steps take one message, one read and one send (the start's), and each
// version the chain writes after the first names its carrier.
func TestChainRunsTenStepsInOneMessage(t *testing.T) {
	t.Parallel()
	e := newEdgeRig(t, linearSaga(""), nil)
	cs := &countingStore{Store: e.store.Store}
	e.store.Store = cs
	e.start("c-1", nil)
	d, ok := e.receive()
	if !ok {
		t.Fatal("no first message")
	}
	carrier, _ := durable.DecodeMessage(d.Body)
	before := cs.gets.Load()
	if out, err := e.coord.Handle(context.Background(), d.Body); err != nil || out != engine.HandledStep {
		t.Fatalf("handle: %s %v", out, err)
	}
	reads := cs.gets.Load() - before
	st := e.get("c-1")
	if st.Status != durable.StatusSucceeded || st.Version != 11 {
		t.Fatalf("after one message: %s v%d, want succeeded v11", st.Status, st.Version)
	}
	if n := e.queue.sent.Load(); n != 1 {
		t.Errorf("%d messages sent, want 1 (the start's)", n)
	}
	if reads != 1 {
		t.Errorf("%d reads of the saga, want 1 (the message's)", reads)
	}
	if st.Carrier != carrier.Version {
		t.Errorf("the last version names carrier %d, want %d", st.Carrier, carrier.Version)
	}
	if got := strings.Join(e.ok, " "); got != "s1 s2 s3 s4 s5 s6 s7 s8 s9 s10" {
		t.Errorf("calls %s", got)
	}
}

// A chain never crosses queues: compensations chain among themselves,
// after the failure's own message.
func TestChainCompensatesInOneMessage(t *testing.T) {
	t.Parallel()
	e := newEdgeRig(t, linearSaga(""), func(_ context.Context, c saga.Call) (any, error) {
		if c.Step == "s10" && !c.Compensation {
			return nil, saga.Permanent(errors.New("declined"))
		}
		return map[string]any{}, nil
	})
	e.start("c-1", nil)
	handled := 0
	for {
		d, ok := e.receive()
		if !ok {
			break
		}
		if _, err := e.coord.Handle(context.Background(), d.Body); err != nil {
			t.Fatal(err)
		}
		_ = e.q.Delete(context.Background(), &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle})
		handled++
	}
	if st := e.get("c-1"); st.Status != durable.StatusCompensated {
		t.Fatalf("status %s", st.Status)
	}
	if handled != 2 {
		t.Errorf("%d messages handled, want 2: the forward chain, the compensation chain", handled)
	}
	e.checkCompensated(t, "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9")
}

// The worker dies in the middle of a chain, after writing a chained
// version and before sending anything: the carrier comes back, finds the
// saga past its version but named as carrier, and sends the stored
// outbox; the saga ends, and no step's effect is lost or doubled beyond
// its key.
func TestCarrierBackAfterACrashMidChainSendsTheStoredOutbox(t *testing.T) {
	t.Parallel()
	e := newEdgeRig(t, linearSaga(""), nil)
	e.start("c-1", nil)
	d, _ := e.receive()
	carrier, _ := durable.DecodeMessage(d.Body)
	// Death after version 4 is written: every write and send after it fails.
	dead := killable(e)
	e.reg.SetFallback(func(_ context.Context, c saga.Call) (any, error) {
		if !c.Compensation {
			e.mu.Lock()
			e.ok = append(e.ok, c.Step)
			e.mu.Unlock()
		}
		if c.Step == "s4" && !dead.Load() && len(e.ok) == 4 {
			dead.Store(true) // s3's version (4) is written; s4 runs, and the worker dies
		}
		return map[string]any{}, nil
	})
	if _, err := e.coord.Handle(context.Background(), d.Body); err == nil {
		t.Fatal("a worker that died mid-chain reported its carrier handled")
	}
	dead.Store(false)
	st := e.get("c-1")
	if st.Version != 4 || st.Carrier != carrier.Version {
		t.Fatalf("after the crash: v%d carrier %d, want v4 carrier %d", st.Version, st.Carrier, carrier.Version)
	}
	// The carrier comes back (its visibility timeout passed).
	out, err := e.coord.Handle(context.Background(), d.Body)
	if err != nil || out != engine.HandledCarrier {
		t.Fatalf("the carrier back: %s %v, want carrier", out, err)
	}
	e.drain()
	if st := e.get("c-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("status %s v%d", st.Status, st.Version)
	}
	if got := strings.Join(e.ok, " "); got != "s1 s2 s3 s4 s4 s5 s6 s7 s8 s9 s10" {
		t.Errorf("calls %s: s4 runs again under its key, nothing else twice", got)
	}
}

// A copy of the carrier's message that comes back after its saga moved
// on past the chain is stale: the version that names it was followed by
// one that does not.
func TestCarrierIsStaleOnceTheSagaMovedOn(t *testing.T) {
	t.Parallel()
	e := newEdgeRig(t, linearSaga("")+"", func(_ context.Context, c saga.Call) (any, error) {
		if c.Step == "s3" && c.Attempt == 1 {
			return nil, errors.New("busy") // retried after a backoff: the chain stops
		}
		return map[string]any{}, nil
	})
	e.start("c-1", nil)
	d, _ := e.receive()
	if _, err := e.coord.Handle(context.Background(), d.Body); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if st := e.get("c-1"); st.Status != durable.StatusSucceeded || st.Carrier == 1 {
		t.Fatalf("status %s carrier %d", st.Status, st.Carrier)
	}
	if out, err := e.coord.Handle(context.Background(), d.Body); err != nil || out != engine.HandledStale {
		t.Fatalf("the first message again: %s %v, want stale", out, err)
	}
}

// A chained step whose write fails (throttled here) is that step's own
// failure: its message is sent, the carrier is done, and the step goes
// on when its message comes.
func TestChainedStepFailureGoesToItsOwnMessage(t *testing.T) {
	t.Parallel()
	e := newEdgeRig(t, linearSaga(""), nil)
	e.start("c-1", nil)
	d, _ := e.receive()
	var updates atomic.Int64
	e.store.setHook(func(op, key string) error {
		if op == "update" && updates.Add(1) == 3 { // the write of s3's outcome
			return durable.ErrThrottled
		}
		return nil
	})
	if out, err := e.coord.Handle(context.Background(), d.Body); err != nil || out != engine.HandledStep {
		t.Fatalf("carrier: %s %v, want handled", out, err)
	}
	st := e.get("c-1")
	if st.Version != 3 || st.Status != durable.StatusRunning {
		t.Fatalf("after the carrier: %s v%d, want running v3", st.Status, st.Version)
	}
	next, ok := e.receive()
	if !ok {
		t.Fatal("the failed step's message was not sent")
	}
	m, _ := durable.DecodeMessage(next.Body)
	if m.Step != "s3" || m.Version != 3 {
		t.Fatalf("message %+v, want s3 at version 3", m)
	}
	if _, err := e.coord.Handle(context.Background(), next.Body); err != nil {
		t.Fatal(err)
	}
	if st := e.get("c-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("status %s", st.Status)
	}
}

// A chain stops where a step is not ready now: a retry's backoff, a wait.
func TestChainStopsAtADelay(t *testing.T) {
	t.Parallel()
	src := `
saga: delays
steps:
  - id: a
    action: a.a
  - id: b
    action: a.b
    retry: {attempts: 2, backoff: 5s}
  - id: pause
    wait: {for: 1m}
  - id: c
    action: a.c
`
	e := newEdgeRig(t, src, func(_ context.Context, c saga.Call) (any, error) {
		if c.Step == "b" && c.Attempt == 1 {
			return nil, errors.New("busy")
		}
		return map[string]any{}, nil
	})
	e.start("d-1", nil)
	d, _ := e.receive()
	if _, err := e.coord.Handle(context.Background(), d.Body); err != nil {
		t.Fatal(err)
	}
	st := e.get("d-1")
	if cur, _ := st.Pending(); st.Version != 3 || cur.Attempt != 2 || st.Outbox[0].Delay == 0 {
		t.Fatalf("after a's message: v%d %+v outbox %+v, want b's retry at v3, delayed", st.Version, st.Cursors, st.Outbox)
	}
	d, _ = e.receive() // b's retry
	if _, err := e.coord.Handle(context.Background(), d.Body); err != nil {
		t.Fatal(err)
	}
	if st := e.get("d-1"); st.Status != durable.StatusWaiting || st.Version != 4 {
		t.Fatalf("after b's retry: %s v%d, want waiting v4 (the wait is a timer)", st.Status, st.Version)
	}
}

// Under an invocation deadline a step chains only when it gets the time
// a fresh invocation would give it: its timeout and 3 s; an untimed step
// only while the invocation is fresh.
func TestChainFitsTheInvocation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		timeout string // the steps' timeout; "" for none
		budget  time.Duration
		left    time.Duration
		want    uint64 // the version after the first message
	}{
		{"timed step that fits", "2s", 30 * time.Second, 20 * time.Second, 11},
		{"timed step that does not fit", "20s", 30 * time.Second, 22500 * time.Millisecond, 2},
		{"untimed step in a fresh invocation", "", 30 * time.Second, 29900 * time.Millisecond, 11},
		{"untimed step in a used invocation", "", 30 * time.Second, 25 * time.Second, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := linearSaga("")
			if tt.timeout != "" {
				src = strings.ReplaceAll(src, "    compensate:", "    timeout: "+tt.timeout+"\n    compensate:")
			}
			e := newEdgeRig(t, src, nil)
			e.start("f-1", nil)
			d, _ := e.receive()
			ctx, cancel := context.WithTimeout(engine.WithInvocationBudget(context.Background(), tt.budget), tt.left)
			defer cancel()
			if _, err := e.coord.Handle(ctx, d.Body); err != nil {
				t.Fatal(err)
			}
			if st := e.get("f-1"); st.Version != tt.want {
				t.Errorf("v%d after the first message, want v%d", st.Version, tt.want)
			}
		})
	}
}

// A chain gives way to the records waiting behind it: with n waiting, it
// stops after ChainTime/(n+1); it stops at half its carrier's visibility
// timeout; its budget in steps bounds it too.
func TestChainBudgets(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		steps      int
		waiting    int
		visibility time.Duration
		want       uint64
	}{
		{"alone", 0, 0, 0, 11},                         // 9 s of actions, ChainTime 10 s
		{"four waiting", 0, 4, 0, 4},                   // 2 s: steps at 0, 1 s chained; the third starts at 2 s
		{"a budget of 3 steps", 3, 0, 0, 5},            // the message's own and 3
		{"a 4 s visibility", 0, 0, 4 * time.Second, 4}, // half of it, 2 s
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var e *rig
			e = newEdgeRig(t, linearSaga(""), func(_ context.Context, c saga.Call) (any, error) {
				e.clock.Advance(time.Second) // each action takes a second
				return map[string]any{}, nil
			})
			cfg := e.cfg
			cfg.ChainTime, cfg.ChainSteps = 10*time.Second, tt.steps
			e.connect(cfg)
			e.start("b-1", nil)
			d, _ := e.receive()
			batch := engine.Batch{Waiting: tt.waiting, Visibility: tt.visibility}
			if _, err := e.coord.Handle(engine.WithBatch(context.Background(), &batch), d.Body); err != nil {
				t.Fatal(err)
			}
			if st := e.get("b-1"); st.Version != tt.want {
				t.Errorf("v%d after the first message, want v%d", st.Version, tt.want)
			}
		})
	}
}

// NewCoordinator refuses a negative ChainTime.
func TestChainTimeMustNotBeNegative(t *testing.T) {
	t.Parallel()
	e := newEdgeRig(t, linearSaga(""), nil)
	cfg := e.cfg
	cfg.ChainTime = -time.Second
	if _, err := engine.NewCoordinator(cfg); err == nil || !strings.Contains(err.Error(), "ChainTime") {
		t.Fatalf("err %v", err)
	}
}

// A cancel lands while a chained step runs, and the worker dies before
// recording the step: the cancel waits for that attempt, which had no
// message of its own. The carrier, back, runs it at the cancel's version
// (not 15 minutes later, when the cancel's fallback copy comes), and the
// saga compensates what it did.
func TestCarrierBackRunsTheAttemptACancelWaitsFor(t *testing.T) {
	t.Parallel()
	carrierBackAfterACancelMidChain(t, "s3", "s1 s2 s3 s3 s3.compensate s2.compensate s1.compensate")
}

// The same on the chain's first step, the one run from the version the
// carrier's own step wrote: that version names the carrier too, so that
// the cancel that lands on it keeps it.
func TestCarrierBackRunsTheAttemptACancelWaitsForOnTheFirstChainedStep(t *testing.T) {
	t.Parallel()
	carrierBackAfterACancelMidChain(t, "s2", "s1 s2 s2 s2.compensate s1.compensate")
}

// carrierBackAfterACancelMidChain cancels the saga while the chained step
// step runs, kills the worker before the step's write, brings the carrier
// back, and checks the saga compensates at once with the calls want.
func carrierBackAfterACancelMidChain(t *testing.T, step, want string) {
	t.Helper()
	e := newEdgeRig(t, linearSaga(""), nil)
	e.start("c-1", nil)
	d, _ := e.receive()
	dead := killable(e)
	var calls atomic.Int64
	e.reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		e.mu.Lock()
		if c.Compensation {
			e.ok = append(e.ok, c.Step+".compensate")
		} else {
			e.ok = append(e.ok, c.Step)
		}
		e.mu.Unlock()
		if c.Step == step && !c.Compensation && calls.Add(1) == 1 {
			if _, err := e.coord.Cancel(context.Background(), "c-1"); err != nil {
				t.Errorf("cancel: %v", err)
			}
			dead.Store(true)
		}
		return map[string]any{}, nil
	})
	if _, err := e.coord.Handle(context.Background(), d.Body); err == nil {
		t.Fatal("a worker that died mid-chain reported its carrier handled")
	}
	dead.Store(false)
	st := e.get("c-1")
	if cur, _ := st.Pending(); !st.CancelRequested || st.Status != durable.StatusRunning || e.plan.StepID(cur.Step) != step {
		t.Fatalf("after the crash: %s v%d cancel %v, want the cancel waiting for %s", st.Status, st.Version, st.CancelRequested, step)
	}
	if out, err := e.coord.Handle(context.Background(), d.Body); err != nil || out != engine.HandledStep {
		t.Fatalf("the carrier back: %s %v, want the attempt run", out, err)
	}
	// Compensations run at once; the cancel's fallback copy, 15 minutes
	// on, finds the saga ended.
	for range 20 {
		d, ok := e.receive()
		if !ok {
			break
		}
		if m, _ := durable.DecodeMessage(d.Body); m.Delay > 0 || m.Queue == durable.QueueAdvance {
			continue // the fallback: left alone
		}
		if _, err := e.coord.Handle(context.Background(), d.Body); err != nil {
			t.Fatal(err)
		}
		_ = e.q.Delete(context.Background(), &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle})
		if e.get("c-1").Status.Final() {
			break
		}
	}
	if st := e.get("c-1"); st.Status != durable.StatusCompensated {
		t.Fatalf("status %s v%d, want compensated without waiting for the fallback", st.Status, st.Version)
	}
	if got := strings.Join(e.ok, " "); got != want {
		t.Errorf("calls %s, want %s", got, want)
	}
}

// Half the visibility timeout counts from the receipt of the batch, not
// from the chain's start: a carrier whose own step (or the records before
// it) used that time chains nothing more, so that it does not show again
// while its chain runs.
func TestChainStopsAtHalfTheVisibilityFromTheReceipt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		received time.Duration // before the carrier's step starts
		want     uint64
	}{
		{"received as it starts", 0, 3},                       // s1 ends at 1 s, s2 at 2 s: s3 would start at half of 4 s
		{"received 1.5 s before", 1500 * time.Millisecond, 2}, // s1 ends past half of it
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var e *rig
			e = newEdgeRig(t, linearSaga(""), func(_ context.Context, c saga.Call) (any, error) {
				e.clock.Advance(time.Second) // each action takes a second
				return map[string]any{}, nil
			})
			cfg := e.cfg
			cfg.ChainTime = time.Minute
			e.connect(cfg)
			e.start("v-1", nil)
			d, _ := e.receive()
			batch := engine.Batch{Visibility: 4 * time.Second, Received: e.clock.Now().Add(-tt.received)}
			if _, err := e.coord.Handle(engine.WithBatch(context.Background(), &batch), d.Body); err != nil {
				t.Fatal(err)
			}
			if st := e.get("v-1"); st.Version != tt.want {
				t.Errorf("v%d after the first message, want v%d", st.Version, tt.want)
			}
		})
	}
}
