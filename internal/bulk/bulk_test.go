package bulk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/bulk"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A saga of two actions: started, its first step is pending (nothing
// handles the queue here), so a cancel is requested and it stays running.
const shipDef = `saga: %s
input: {id: string}
steps:
  - id: pack
    action: box.pack
    compensate: {action: box.unpack}
  - id: send
    action: post.send
`

// rig is a coordinator on memory, and sagas started on it.
type rig struct {
	clock *durable.ManualClock
	coord *engine.Coordinator
	plans map[string]*saga.Plan
}

func newRig(t *testing.T, store durable.Store, queue durable.Queue) *rig {
	t.Helper()
	r := &rig{clock: durable.NewManualClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)), plans: map[string]*saga.Plan{}}
	var err error
	r.coord, err = engine.NewCoordinator(engine.CoordinatorConfig{Store: store, Queue: queue, Actions: engine.NewRegistry(), Clock: r.clock, Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newMemoryRig(t *testing.T) *rig {
	return newRig(t, memstore.New(), memqueue.New(memqueue.Config{}))
}

// start starts n sagas of name, a second apart, with ids name-000...
func (r *rig) start(t *testing.T, name string, n int) []string {
	t.Helper()
	plan, ok := r.plans[name]
	if !ok {
		var err error
		if plan, err = saga.Compile(name+".yaml", fmt.Appendf(nil, shipDef, name), saga.Options{}); err != nil {
			t.Fatal(err)
		}
		r.plans[name] = plan
	}
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%03d", name, i)
		r.clock.Advance(time.Second)
		if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: id, Input: map[string]any{"id": id}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func cancelVerb(t *testing.T) bulk.Verb {
	t.Helper()
	v, ok := bulk.VerbNamed("cancel")
	if !ok {
		t.Fatal("no verb cancel")
	}
	return v
}

// cancelRequested lists the sagas of ids whose cancel was requested.
func (r *rig) cancelRequested(t *testing.T, ids []string) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		st, err := r.coord.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.CancelRequested {
			out = append(out, id)
		}
	}
	return out
}

// A run pages through more sagas than a page holds, keeps those of the
// name, acts on each, and tells its progress page by page.
func TestRunPagesThroughEveryMatch(t *testing.T) {
	t.Parallel()
	r := newMemoryRig(t)
	ships := r.start(t, "ship", 25)
	others := r.start(t, "other", 5)
	var pages []bulk.Progress
	res, err := bulk.Run(context.Background(), r.coord, bulk.Params{Verb: cancelVerb(t), Status: durable.StatusRunning, Name: "ship", PageSize: 10,
		Progress: func(p bulk.Progress) {
			if p.PageDone {
				pages = append(pages, p)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Read != 30 || res.Matched != 25 || res.Acted() != 25 || len(res.Skipped) != 0 || len(res.Failed) != 0 {
		t.Fatalf("read %d, matched %d, acted %d, skipped %v, failed %v; want 30 read, 25 acted", res.Read, res.Matched, res.Acted(), res.Skipped, res.Failed)
	}
	if got := r.cancelRequested(t, ships); len(got) != 25 {
		t.Errorf("%d of the ship sagas cancelled, want 25", len(got))
	}
	if got := r.cancelRequested(t, others); len(got) != 0 {
		t.Errorf("other sagas cancelled: %v", got)
	}
	if len(pages) != 3 || pages[2].Pages != 3 || pages[2].Acted != 25 || pages[0].Read != 10 || pages[0].Status != durable.StatusRunning {
		t.Errorf("progress by page %+v, want 3 pages of 10", pages)
	}
	// Newest first, as list shows them.
	want := slices.Clone(ships)
	slices.Reverse(want)
	if !slices.Equal(res.SagaIDs, want) {
		t.Errorf("acted on %v, want %v", res.SagaIDs, want)
	}
}

// A run cut off half-way and run again acts on the rest: what the first
// acted on is skipped with its reason, nothing is acted on twice.
func TestRunInterruptedAndRunAgain(t *testing.T) {
	t.Parallel()
	r := newMemoryRig(t)
	ids := r.start(t, "ship", 12)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	res, err := bulk.Run(ctx, r.coord, bulk.Params{Verb: cancelVerb(t), Name: "ship", PageSize: 5, Progress: func(p bulk.Progress) {
		if p.Acted == 7 {
			stop()
		}
	}})
	if !errors.Is(err, context.Canceled) || res.Acted() != 7 {
		t.Fatalf("interrupted run: acted %d, %v; want 7 and context.Canceled", res.Acted(), err)
	}
	first := res.SagaIDs
	res, err = bulk.Run(context.Background(), r.coord, bulk.Params{Verb: cancelVerb(t), Name: "ship", PageSize: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Acted() != 5 || len(res.Skipped) != 7 || len(res.Failed) != 0 {
		t.Fatalf("run again: acted %v, skipped %v, failed %v; want 5 acted, 7 skipped", res.SagaIDs, res.Skipped, res.Failed)
	}
	for _, s := range res.Skipped {
		if !slices.Contains(first, s.SagaID) || s.Reason != "cancel already requested" {
			t.Errorf("skipped %+v: want one the first run cancelled, already requested", s)
		}
	}
	if got := r.cancelRequested(t, ids); len(got) != 12 {
		t.Errorf("%d cancelled, want 12", len(got))
	}
}

// A dry run lists what a run would act on and acts on none.
func TestDryRunActsOnNone(t *testing.T) {
	t.Parallel()
	r := newMemoryRig(t)
	r.start(t, "old", 3)
	since := r.clock.Now()
	recent := r.start(t, "ship", 4)
	res, err := bulk.Run(context.Background(), r.coord, bulk.Params{Verb: cancelVerb(t), All: true, After: since.Add(time.Nanosecond), DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(recent)
	slices.Reverse(want)
	if !slices.Equal(res.SagaIDs, want) || res.Matched != 4 || res.Acted() != 0 || !res.DryRun {
		t.Fatalf("dry run: %+v, want the 4 recent ones listed", res)
	}
	if got := r.cancelRequested(t, recent); len(got) != 0 {
		t.Errorf("a dry run cancelled %v", got)
	}
}

// A filter the verb cannot act on, or none, is refused before anything is
// read.
func TestRunRefusesUnsafeFilters(t *testing.T) {
	t.Parallel()
	resume, _ := bulk.VerbNamed("resume")
	for _, c := range []struct {
		p    bulk.Params
		want string
	}{
		{bulk.Params{Verb: cancelVerb(t), Status: durable.StatusCompensationFailed}, "cancel acts on sagas running, waiting or held, not compensation_failed"},
		{bulk.Params{Verb: resume, Status: durable.StatusRunning, Name: "x"}, "resume acts on sagas compensation_failed, not running"},
		{bulk.Params{Verb: cancelVerb(t)}, "too broad"},
	} {
		_, err := bulk.Run(context.Background(), failingLister{}, c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
		}
	}
}

type failingLister struct{ bulk.Source }

// A saga the verb fails on is reported with its reason and the run goes
// on; one that lost a race is tried again; one acted on by somebody else
// between the listing and the act is skipped.
func TestRunGoesOnPastFailures(t *testing.T) {
	t.Parallel()
	r := newMemoryRig(t)
	r.start(t, "ship", 6)
	src := &flaky{Coordinator: r.coord, fail: "ship-004", conflict: "ship-002", raced: "ship-001"}
	res, err := bulk.Run(context.Background(), src, bulk.Params{Verb: cancelVerb(t), Status: durable.StatusRunning})
	if err != nil {
		t.Fatal(err)
	}
	if res.Acted() != 4 || !slices.Contains(res.SagaIDs, "ship-002") {
		t.Errorf("acted on %v, want 4, ship-002 after its conflict", res.SagaIDs)
	}
	if len(res.Failed) != 1 || res.Failed[0].SagaID != "ship-004" || !strings.Contains(res.Failed[0].Reason, "throttled") {
		t.Errorf("failed %v, want ship-004 throttled", res.Failed)
	}
	if len(res.Skipped) != 1 || res.Skipped[0] != (bulk.Outcome{SagaID: "ship-001", Reason: "cancel already requested"}) {
		t.Errorf("skipped %v, want ship-001, cancelled by another", res.Skipped)
	}
}

// flaky fails the cancel of one saga, loses one race once, and cancels
// one saga itself as soon as it is listed.
type flaky struct {
	*engine.Coordinator
	fail, conflict, raced string
	mu                    sync.Mutex
	conflicted            bool
}

func (f *flaky) List(ctx context.Context, p *durable.SagaListParams) (*durable.SagaListResult, error) {
	res, err := f.Coordinator.List(ctx, p)
	if err == nil {
		_, err = f.Coordinator.Cancel(ctx, f.raced)
	}
	return res, err
}

func (f *flaky) Cancel(ctx context.Context, id string) (*saga.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case id == f.fail:
		return nil, fmt.Errorf("cancel %s: %w", id, durable.ErrThrottled)
	case id == f.conflict && !f.conflicted:
		f.conflicted = true
		return nil, fmt.Errorf("cancel %s: %w", id, durable.ErrConflict)
	}
	return f.Coordinator.Cancel(ctx, id)
}

// A saga that holds on failure, its second action failing for good.
const holdDef = `saga: hold
on_failure: hold
steps:
  - id: pack
    action: box.pack
    compensate: {action: box.unpack}
  - id: charge
    action: card.charge
`

// Held sagas are retried, or compensated, every one a filter matches.
func TestRunRetriesAndCompensatesHeldSagas(t *testing.T) {
	t.Parallel()
	q := memqueue.New(memqueue.Config{})
	reg := engine.NewRegistry()
	reg.MustRegister("box.pack", func(context.Context, saga.Call) (any, error) { return map[string]any{}, nil })
	reg.MustRegister("box.unpack", func(context.Context, saga.Call) (any, error) { return map[string]any{}, nil })
	reg.MustRegister("card.charge", func(context.Context, saga.Call) (any, error) {
		return nil, saga.Permanent(saga.NewError("Declined", "no"))
	})
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: memstore.New(), Queue: q, Actions: reg, ChainSteps: -1})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := saga.Compile("hold.yaml", []byte(holdDef), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	drain := func() {
		t.Helper()
		for _, queue := range []durable.QueueName{durable.QueueAdvance, durable.QueueCompensate} {
			for {
				ds, err := q.Receive(ctx, &durable.ReceiveParams{Queue: queue, Max: 10})
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) == 0 {
					break
				}
				for _, d := range ds {
					msg, err := durable.DecodeMessage(d.Body)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := coord.HandleMessage(ctx, msg); err != nil {
						t.Fatal(err)
					}
					_ = q.Delete(ctx, &durable.DeleteParams{Queue: queue, ReceiptHandle: d.ReceiptHandle})
				}
			}
		}
	}
	for i := range 4 {
		if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: fmt.Sprintf("h-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	drain()
	retry, _ := bulk.VerbNamed("retry")
	res, err := bulk.Run(ctx, coord, bulk.Params{Verb: retry, Status: durable.StatusHeld, Name: "hold"})
	if err != nil || res.Acted() != 4 || len(res.Failed) != 0 {
		t.Fatalf("retry: %+v %v", res, err)
	}
	drain() // the charge fails again: held again
	compensate, _ := bulk.VerbNamed("compensate")
	if res, err = bulk.Run(ctx, coord, bulk.Params{Verb: compensate, Name: "hold"}); err != nil || res.Acted() != 4 || len(res.Failed) != 0 {
		t.Fatalf("compensate: %+v %v", res, err)
	}
	drain()
	for i := range 4 {
		st, err := coord.Get(ctx, fmt.Sprintf("h-%d", i))
		if err != nil || st.Status != durable.StatusCompensated {
			t.Errorf("h-%d: %v %v, want compensated", i, st.Status, err)
		}
	}
	if res, err = bulk.Run(ctx, coord, bulk.Params{Verb: retry, Name: "hold"}); err != nil || res.Matched != 0 {
		t.Errorf("retry once compensated: %+v %v, want nothing matched", res, err)
	}
}
