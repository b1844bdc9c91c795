package bench_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// pausedSaga calls prep, then work (which the tests pause), then prep.
const pausedSaga = `saga: held
steps:
  - {id: a, action: prep}
  - {id: b, action: work, compensate: {action: undo}}
  - {id: c, action: prep}
`

// workCalls counts the calls of each action per saga, with their attempts.
type workCalls struct {
	mu    sync.Mutex
	calls map[string][]int // "saga/action" -> attempts called
}

func (w *workCalls) registry() *engine.Registry {
	w.calls = map[string][]int{}
	reg := engine.NewRegistry()
	for _, a := range []string{"prep", "work", "undo"} {
		reg.MustRegister(a, func(_ context.Context, c saga.Call) (any, error) {
			w.mu.Lock()
			w.calls[c.SagaID+"/"+c.Action] = append(w.calls[c.SagaID+"/"+c.Action], c.Attempt)
			w.mu.Unlock()
			return map[string]any{"id": c.IdempotencyKey}, nil
		})
	}
	return reg
}

func (w *workCalls) of(key string) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]int(nil), w.calls[key]...)
}

// On the emulators with the real engine and workers: sagas whose action
// is paused do not run it, their version and attempt stay; after the
// unpause every one completes, the action called once, at attempt 1.
func TestPausedActionOnEmulators(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of workers on the emulators")
	}
	t.Parallel()
	b := awstest.New(t)
	var w workCalls
	plan, err := saga.Compile("held.yaml", []byte(pausedSaga), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: b.Queue, Actions: w.registry(), PausePoll: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	for _, q := range durable.QueueNames() {
		for range 2 {
			wg.Go(func() {
				_ = engine.RunWorker(ctx, engine.WorkerConfig{Coordinator: coord, Receiver: b.Queue, Queue: q, Wait: 100 * time.Millisecond, Visibility: 30 * time.Second})
			})
		}
	}
	defer wg.Wait()
	defer stop()
	bg := context.Background()
	if err := coord.Pause(bg, &engine.PauseParams{Kind: durable.PauseAction, Target: "work"}); err != nil {
		t.Fatal(err)
	}
	const n = 5
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("held-%d", i)
		if _, err := coord.Start(bg, &engine.StartParams{Plan: plan, SagaID: ids[i]}); err != nil {
			t.Fatal(err)
		}
	}
	// Held at b: prep ran, work did not; a few deferrals later, still at
	// the same version and attempt.
	pendingAt := func(id string) (uint64, saga.Cursor) {
		st, err := coord.Get(bg, id)
		if err != nil {
			t.Fatal(err)
		}
		cur, _ := st.Pending()
		return st.Version, cur
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range ids {
		for len(w.of(id+"/prep")) == 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(300 * time.Millisecond)
	before := map[string]uint64{}
	for _, id := range ids {
		v, cur := pendingAt(id)
		if cur.Attempt != 1 || cur.Compensating {
			t.Fatalf("%s held at %+v, want its step b at attempt 1", id, cur)
		}
		before[id] = v
	}
	time.Sleep(3 * time.Second) // three polls of a second each
	for _, id := range ids {
		if calls := w.of(id + "/work"); len(calls) != 0 {
			t.Fatalf("%s: work called %v while paused", id, calls)
		}
		if v, cur := pendingAt(id); v != before[id] || cur.Attempt != 1 {
			t.Fatalf("%s moved while paused: version %d (was %d), attempt %d", id, v, before[id], cur.Attempt)
		}
	}
	if err := coord.Unpause(bg, durable.PauseAction, "work"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			st, err := coord.Get(bg, id)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status == durable.StatusSucceeded {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is %s 30 s after the unpause", id, st.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if calls := w.of(id + "/work"); len(calls) != 1 || calls[0] != 1 {
			t.Errorf("%s: work called at attempts %v, want once at 1", id, calls)
		}
	}
}

// TestPauseEconomy measures what one deferral of a paused step costs on
// the emulators, as the request-economy tests count (bench/README.md,
// "Pauses"): the saga's read, no write, one send; the pauses themselves
// are read once per process per engine.PauseTTL, not per step.
func TestPauseEconomy(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a few deferrals of a second")
	}
	b := awstest.New(t)
	// The action limits' cache reads beside the pauses' (an action's first
	// call): measured on their own, by TestLimitRequestsAsBilled.
	b.Counter.Skip(func(service, op string, params any) bool {
		in, ok := params.(*dynamodb.GetItemInput)
		if !ok {
			return false
		}
		pk, _ := in.Key["pk"].(*types.AttributeValueMemberS)
		return pk != nil && pk.Value == "LIMITS"
	})
	var w workCalls
	plan, err := saga.Compile("held.yaml", []byte(pausedSaga), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: b.Queue, Actions: w.registry(), ChainSteps: -1, PausePoll: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := coord.Pause(ctx, &engine.PauseParams{Kind: durable.PauseAction, Target: "work"}); err != nil {
		t.Fatal(err)
	}
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "econ-held"}); err != nil {
		t.Fatal(err)
	}
	const deferrals = 4
	var costs []stepCost
	var pauseReads int
	for i := 0; len(costs) < deferrals && i < 40; i++ {
		ds, err := b.Queue.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1, Wait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			continue
		}
		b.Counter.Reset()
		out, err := coord.Handle(ctx, ds[0].Body)
		if err != nil {
			t.Fatal(err)
		}
		c := snapshot(b, string(out))
		_ = b.Queue.Delete(ctx, &durable.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle})
		if out != engine.HandledPaused {
			pauseReads += c.reads - 1 // the first message (step a) reads the pauses once, beside the saga
			continue
		}
		costs = append(costs, c)
	}
	if len(costs) != deferrals {
		t.Fatalf("%d deferrals seen, want %d", len(costs), deferrals)
	}
	for i, c := range costs {
		if c.reads != 1 || c.writes != 0 || c.sends != 1 || c.wru != 0 || c.billedWRU != 0 {
			t.Errorf("deferral %d: %d reads (%.1f RRU), %d writes (%.1f WRU billed), %d sends; want the saga's read, no write, one send", i, c.reads, c.rru, c.writes, c.billedWRU, c.sends)
		}
	}
	if pauseReads != 1 {
		t.Errorf("the pauses were read %d times for %d messages within %s, want once", pauseReads, deferrals+1, engine.PauseTTL)
	}
	if calls := w.of("econ-held/work"); len(calls) != 0 {
		t.Fatalf("work called while paused: %v", calls)
	}
	c := costs[0]
	t.Logf("| a deferral of a paused step | %d read (%.1f RRU, the saga's) | %d writes (%.0f WRU billed) | %d send | pauses read once per process per %s |", c.reads, c.billedRRU, c.writes, c.billedWRU, c.sends, engine.PauseTTL)
}
