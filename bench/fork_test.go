package bench_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/accounting"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// forkScaleYAML is the fan-out of the fork's design goal: a foreach over 100
// elements, 50 at a time, whose body is one action step.
const forkScaleYAML = `saga: fan
input: {items: list}
steps:
  - id: ship_all
    foreach: "${input.items}"
    concurrency: 50
    steps:
      - {id: ship, action: shipping.send, with: {sku: "${item}"}, out: parcel}
    out: parcels
`

// TestForkScale runs a foreach of 100 iterations at concurrency 50 on the
// emulators with 4 workers on each queue, and measures what the fork
// costs as AWS bills it: the conditional writes that failed (conflicts)
// and the write units billed, per completed iteration. Its body's own
// cost is one action transition (1 write unit): the goals are at most 0.2
// conflicts and at most 2 write units beyond the body per iteration.
// Not parallel: its conflicts depend on timing, so on the emulators' other load.
func TestForkScale(t *testing.T) {
	b := awstest.New(t)
	const n, workers = 100, 4
	reg := engine.NewRegistry()
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(14, 14))
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		mu.Lock()
		d := time.Duration(5+rnd.IntN(20)) * time.Millisecond // the iterations' work overlaps
		mu.Unlock()
		time.Sleep(d)
		return map[string]any{"parcel": c.Input}, nil
	})
	plan, err := saga.Compile("fan.yaml", []byte(forkScaleYAML), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	coords := make([]*engine.Coordinator, workers)
	held := &expireHeld{Queue: b.Queue} // the walk that expires the tree is measured by TestForkTreeExpireCost
	for i := range coords {
		if coords[i], err = engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: held, Actions: reg}); err != nil {
			t.Fatal(err)
		}
		for _, q := range durable.QueueNames() {
			wg.Go(func() {
				_ = engine.RunWorker(ctx, engine.WorkerConfig{Coordinator: coords[i], Receiver: b.Queue, Queue: q, Wait: 50 * time.Millisecond, Visibility: 30 * time.Second})
			})
		}
	}
	items := make([]any, n)
	for i := range items {
		items[i] = fmt.Sprintf("sku-%03d", i)
	}
	b.Counter.Reset()
	began := time.Now()
	if _, err := coords[0].Start(ctx, &engine.StartParams{Plan: plan, SagaID: "fan-1", Input: map[string]any{"items": items}}); err != nil {
		t.Fatal(err)
	}
	var st *saga.State
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if st, err = coords[0].Get(ctx, "fan-1"); err != nil {
			t.Fatal(err)
		}
		if st.Status.Final() || time.Now().After(deadline) {
			break
		}
	}
	took := time.Since(began)
	// The workers stop before the meter is read: the write that ended the
	// saga may be seen by the read above before the meter has counted it
	// (the meter counts a call once its response is back in the worker).
	cancel()
	wg.Wait()
	snap := b.Counter.Snapshot()
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("fan-1 %s: %+v", st.Status, st.Failure)
	}
	out := st.Vars["parcels"].([]any)
	if len(out) != n || out[7].(map[string]any)["parcel"].(map[string]any)["sku"] != "sku-007" {
		t.Fatalf("outputs out of order or missing: %d, %v", len(out), out[7])
	}
	var wru, index float64
	conflicts := 0
	for op, s := range snap {
		if s.Unbilled > 0 {
			t.Errorf("%s: %d calls unbilled", op, s.Unbilled)
		}
		wru += s.BilledWriteUnits
		index += s.BilledIndexWriteUnits
		if op == "DynamoDB.PutItem" || op == "DynamoDB.UpdateItem" {
			conflicts += s.Errors // the emulator's only write errors here: failed conditions
		}
	}
	perIteration, conflictRate := wru/n, float64(conflicts)/n
	var rru float64
	for _, s := range snap {
		rru += s.BilledReadUnits
	}
	t.Logf("%d iterations at concurrency 50, %d workers, in %s: %d conflicts (%.2f per iteration); %.0f write units billed (%.0f on indexes), %.2f per iteration; %.0f read units, %.2f per iteration",
		n, workers, took.Round(time.Millisecond), conflicts, conflictRate, wru, index, perIteration, rru, rru/n)
	t.Logf("requests:%s", requests(snap))
	if conflictRate > 0.2 {
		t.Errorf("%.2f conflicts per iteration, over the goal of 0.2", conflictRate)
	}
	// Each iteration writes its child's item twice (the create, which
	// starts its action, and the action's outcome: the body's own
	// transition) and counts it once in the fork record; the parent writes
	// three times in all (its start, which forks, and the join).
	puts, updates := snap["DynamoDB.PutItem"].Calls, snap["DynamoDB.UpdateItem"].Calls
	if puts != 2*n+3 || updates != n {
		t.Errorf("%d puts and %d updates, want %d and %d", puts, updates, 2*n+3, n)
	}
	// A child item is under 1 KB, so each of those writes bills 1 unit:
	// beyond the body's own transition, an iteration bills 2 (its create
	// and its count). The rest is the parent's three writes, which hold
	// the input list and the outputs.
	rec, err := b.Store.SagaGet(context.Background(), &durable.SagaGetParams{SagaID: durable.ChildID("fan-1", "ship_all", 1, n-1)})
	if err != nil {
		t.Fatal(err)
	}
	if size := len(rec.State) + 300; size > 1024 {
		t.Errorf("a child's item is about %d bytes: over 1 KB, it bills more than 1 unit a write", size)
	}
	parent := wru - 3*n
	t.Logf("per iteration: 1 (the body's transition) + 2 (the child's create and its count) = 3; the parent's three writes %.0f units in all (%.2f per iteration)", parent, parent/n)
	if parent > 3*8 {
		t.Errorf("the parent's three writes billed %.0f units: more than its state warrants", parent)
	}
}

func requests(s map[string]accounting.Stat) string {
	line := ""
	for _, op := range []string{"DynamoDB.GetItem", "DynamoDB.PutItem", "DynamoDB.UpdateItem", "SQS.SendMessage", "SQS.SendMessageBatch", "SQS.ReceiveMessage", "SQS.DeleteMessage", "SQS.DeleteMessageBatch"} {
		if st, ok := s[op]; ok && st.Calls > 0 {
			line += fmt.Sprintf(" %s×%d", op, st.Calls)
		}
	}
	return line
}
