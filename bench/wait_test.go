package bench_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/accounting"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/cost"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// TestWaitCost measures, on the emulators, what a 30-day wait costs as
// AWS bills it: from the write that parks the saga to the one that wakes
// it, every request the saga causes. The clock is a manual one, so the 30
// days pass at once; the tick runs when the timer is due, as the
// every-minute tick would within a minute of it. (The ticks that find
// nothing are the deployment's, not the saga's: 43,200 a month whatever
// waits, in bench/README.md.)
func TestWaitCost(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	ctx := context.Background()
	clock := durable.NewManualClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) { return map[string]any{"ok": true}, nil })
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: b.Queue, Actions: reg, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := saga.Compile("trial.yaml", []byte("saga: trial\nsteps:\n  - {id: open, action: accounts.open}\n  - {id: trial, wait: {for: 720h}}\n  - {id: bill, action: payments.charge}\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	handleOne := func() (string, bool) {
		t.Helper()
		ds, err := b.Queue.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return "", false
		}
		msg, _ := durable.DecodeMessage(ds[0].Body)
		if _, err := coord.Handle(ctx, ds[0].Body); err != nil {
			t.Fatalf("handle %s: %v", msg.Step, err)
		}
		if err := b.Queue.Delete(ctx, &durable.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
		return msg.Step, true
	}
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "trial-1"}); err != nil {
		t.Fatal(err)
	}
	// open runs; its transition parks the saga on its 30-day timer.
	b.Counter.Reset()
	if step, ok := handleOne(); !ok || step != "open" {
		t.Fatalf("first message: %q %v", step, ok)
	}
	park := b.Counter.Snapshot()
	st, err := coord.Get(ctx, "trial-1")
	if err != nil || st.Status != durable.StatusWaiting {
		t.Fatalf("after open: %v %v", st.Status, err)
	}
	if _, ok := handleOne(); ok {
		t.Fatal("a message while the saga waits 30 days")
	}
	// 30 days later: the tick sends the timer's message; its handling wakes the saga.
	clock.Advance(st.WakeAt().Sub(clock.Now()))
	b.Counter.Reset()
	res, err := coord.Tick(ctx, &engine.TickParams{})
	if err != nil || res.Sent != 1 {
		t.Fatalf("tick: %+v %v", res, err)
	}
	tick := b.Counter.Snapshot()
	b.Counter.Reset()
	if step, ok := handleOne(); !ok || step != "trial" {
		t.Fatalf("the timer's message: %q %v", step, ok)
	}
	wake := b.Counter.Snapshot()
	if st, _ := coord.Get(ctx, "trial-1"); st.Status != durable.StatusRunning {
		t.Fatalf("after the timer: %s", st.Status)
	}

	report := func(name string, s map[string]accounting.Stat) (requests int, wru, index, rru float64) {
		line := ""
		for _, op := range slices.Sorted(maps.Keys(s)) {
			st := s[op]
			if st.Unbilled > 0 {
				t.Errorf("%s: %s unbilled", name, op)
			}
			requests += st.Calls
			wru += st.BilledWriteUnits
			index += st.BilledIndexWriteUnits
			rru += st.BilledReadUnits
			line += fmt.Sprintf(" %s×%d", op, st.Calls)
		}
		t.Logf("%s:%s; %.1f WRU billed (%.0f on indexes), %.1f RRU", name, line, wru, index, rru)
		return
	}
	_, pwru, pindex, _ := report("parking (open's step, whose transition starts the wait)", park)
	tr, _, _, _ := report("the tick that finds it due", tick)
	wr, wwru, windex, _ := report("the timer's message: read, wake, send bill's message", wake)
	// The tick's queries (one per shard of by_due) are the deployment's:
	// every tick makes them, whatever waits. The saga's own share of it is
	// its read and its message.
	queries := tick["DynamoDB.Query"].Calls
	if queries != 32 {
		t.Errorf("the tick made %d queries, want one per shard (32)", queries)
	}
	own := tr - queries + wr
	t.Logf("the wait's own requests, whatever its length: %d (the tick's read and send, then the timer's receive, read, write, delete)", own)
	if own > 8 {
		t.Errorf("a 30-day wait cost %d requests of its own to wake: want a handful", own)
	}
	// Entering and leaving waiting: the by_status entry moves twice (2 + 2)
	// and the by_due entry is put and deleted (1 + 1).
	if pwru != 1+3 || pindex != 3 {
		t.Errorf("parking bills %.0f WRU (%.0f on indexes), want 4: 1 on the table, 2 on by_status (running to waiting), 1 on by_due (the timer set)", pwru, pindex)
	}
	if wwru != 1+3 || windex != 3 {
		t.Errorf("waking bills %.0f WRU (%.0f on indexes), want 4: 1 on the table, 2 on by_status (waiting to running), 1 on by_due (the timer removed)", wwru, windex)
	}
	// What sagactl cost prices a wait at, against a saga without it: the
	// measured reads (the tick's and the timer's), write and index units.
	reads := tick["DynamoDB.GetItem"].Calls + wake["DynamoDB.GetItem"].Calls
	without, err := saga.Compile("plain.yaml", []byte("saga: trial\nsteps:\n  - {id: open, action: accounts.open}\n  - {id: bill, action: payments.charge}\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	with, err := cost.Walk(plan, cost.Params{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	base, err := cost.Walk(without, cost.Params{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, w, ix := with.Unchained.DynamoReads-base.Unchained.DynamoReads, with.DynamoWrites-base.DynamoWrites, with.IndexWRU-base.IndexWRU; r != reads || w != 1 || ix != pindex+windex {
		t.Errorf("the cost model prices the wait at %d reads, %d writes, %g index WRU more; measured %d, 1, %g", r, w, ix, reads, pindex+windex)
	}
	// With chains the wait also costs bill's message: without the wait,
	// open's message carries bill (a write, no read); after the timer,
	// bill is a message of its own, and its read is one more.
	if r := with.DynamoReads - base.DynamoReads; r != reads+1 || base.ChainedSteps != 1 || with.ChainedSteps != 0 {
		t.Errorf("with chains, the cost model prices the wait at %d reads more (%d and %d steps chained); want the measured %d and bill's 1", r, with.ChainedSteps, base.ChainedSteps, reads)
	}
}
