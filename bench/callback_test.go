package bench_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/accounting"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/cost"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// bill is what one phase of a saga cost, as AWS bills it.
type bill struct {
	ops      map[string]int // requests by operation
	requests int
	table    float64 // write units billed on the table
	byStatus float64 // on the by_status index
	byDue    float64 // on the by_due index
	rru      float64
}

func (b bill) wru() float64 { return b.table + b.byStatus + b.byDue }

func (b bill) String() string {
	line := ""
	for _, op := range slices.Sorted(maps.Keys(b.ops)) {
		line += fmt.Sprintf(" %s×%d", op, b.ops[op])
	}
	return fmt.Sprintf("%d requests (%s); %.0f WRU: %.0f table, %.0f by_status, %.0f by_due; %.0f RRU", b.requests, strings.TrimSpace(line), b.wru(), b.table, b.byStatus, b.byDue, b.rru)
}

// plus adds bills; minus takes one away.
func (b bill) plus(o bill, sign int) bill {
	r := bill{ops: map[string]int{}, requests: b.requests + sign*o.requests, table: b.table + float64(sign)*o.table,
		byStatus: b.byStatus + float64(sign)*o.byStatus, byDue: b.byDue + float64(sign)*o.byDue, rru: b.rru + float64(sign)*o.rru}
	for op, n := range b.ops {
		r.ops[op] += n
	}
	for op, n := range o.ops {
		r.ops[op] += sign * n
		if r.ops[op] == 0 {
			delete(r.ops, op)
		}
	}
	return r
}

func billOf(t *testing.T, s map[string]accounting.Stat) bill {
	t.Helper()
	b := bill{ops: map[string]int{}}
	for op, st := range s {
		if st.Unbilled > 0 {
			t.Errorf("%s unbilled", op)
		}
		b.ops[op] += st.Calls
		b.requests += st.Calls
		b.table += st.BilledWriteUnits - st.BilledIndexWriteUnits
		b.byStatus += st.BilledIndexes["by_status"]
		b.byDue += st.BilledIndexes["by_due"]
		b.rru += st.BilledReadUnits
	}
	return b
}

// TestCallbackCost measures, on the emulators, what a callback step and an
// await cost more than a plain action step, every request counted and
// billed as AWS bills it (the accounting middleware): a callback step
// whose action returns and whose token is completed an hour later (its
// timeout, 1h, is past 15 minutes, so its timer is the tick's, never
// sent); an await whose signal wakes it; and an await whose signal came
// first, kept until the saga reached it. Each step is measured as a
// message of its own (chains off: a plain step's message would carry
// ship); the model's figures without chains are compared with these, and
// with chains the model adds ship's message where a pause breaks the
// chain (TestChainedRequestEconomy measures chains).
func TestCallbackCost(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	b.Counter.Skip(accounting.EventualReads) // the pauses' and limits' caches: TestPauseEconomy, TestLimitRequestsAsBilled
	ctx := context.Background()
	clock := durable.NewManualClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) { return map[string]any{"ok": true}, nil })
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: b.Store, Queue: b.Queue, Actions: reg, Clock: clock, ChainSteps: -1})
	if err != nil {
		t.Fatal(err)
	}
	compile := func(src string) *saga.Plan {
		t.Helper()
		plan, err := saga.Compile("bench.yaml", []byte(src), saga.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}
	plain := compile("saga: plain\nsteps:\n  - {id: pay, action: payments.start}\n  - {id: ship, action: shipping.create}\n")
	callback := compile("saga: callback\nsteps:\n  - {id: pay, action: payments.start, callback: {timeout: 1h}}\n  - {id: ship, action: shipping.create}\n")
	await := compile("saga: approval\nsteps:\n  - {id: pay, action: payments.start}\n  - {id: approve, await: {signal: approval, timeout: 72h}, out: answer}\n  - {id: ship, action: shipping.create}\n")

	// handle handles the one message the queue holds; it must be want's.
	handle := func(want string) {
		t.Helper()
		ds, err := b.Queue.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 {
			t.Fatalf("want %s's message, got %d messages", want, len(ds))
		}
		msg, _ := durable.DecodeMessage(ds[0].Body)
		if msg.Step != want {
			t.Fatalf("message for %s, want %s", msg.Step, want)
		}
		if _, err := coord.Handle(ctx, ds[0].Body); err != nil {
			t.Fatalf("handle %s: %v", msg.Step, err)
		}
		if err := b.Queue.Delete(ctx, &durable.DeleteParams{Queue: ds[0].Queue, ReceiptHandle: ds[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	// drain handles what the queue still holds, and says how many.
	drain := func() int {
		t.Helper()
		n := 0
		for {
			ds, err := b.Queue.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10, Wait: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) == 0 {
				return n
			}
			for _, d := range ds {
				if _, err := coord.Handle(ctx, d.Body); err != nil {
					t.Fatal(err)
				}
				if err := b.Queue.Delete(ctx, &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle}); err != nil {
					t.Fatal(err)
				}
				n++
			}
		}
	}
	// measure runs f with the counter reset and bills what it did.
	measure := func(name string, f func()) bill {
		t.Helper()
		b.Counter.Reset()
		f()
		got := billOf(t, b.Counter.Snapshot())
		t.Logf("%s: %s", name, got)
		return got
	}
	status := func(id string, want durable.Status) *saga.State {
		t.Helper()
		st, err := coord.Get(ctx, id)
		if err != nil || st.Status != want {
			t.Fatalf("%s: %v %v, want %s", id, st.Status, err, want)
		}
		return st
	}
	start := func(plan *saga.Plan, id string) {
		t.Helper()
		if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: id}); err != nil {
			t.Fatal(err)
		}
	}

	// The baseline: pay, a plain action step, sends ship's message.
	start(plain, "plain-1")
	step := measure("a plain action step (pay)", func() { handle("pay") })
	status("plain-1", durable.StatusRunning)
	handle("ship")
	if n := drain(); n != 0 {
		t.Fatalf("plain: %d messages more", n)
	}

	// A callback step: pay's action returns, the saga waits on the token.
	start(callback, "cb-1")
	park := measure("a callback step's action (pay), the saga parked on its token", func() { handle("pay") })
	st := status("cb-1", durable.StatusWaiting)
	token := callback.CallbackToken(st)
	if token == "" {
		t.Fatal("no token for the waiting callback step")
	}
	clock.Advance(time.Hour - time.Minute)
	done := measure("the token completed (CompleteCallback), ship's message sent", func() {
		d, err := coord.CompleteCallback(ctx, token, map[string]any{"paid": true})
		if err != nil || d.Receipt != saga.ReceiptApplied {
			t.Fatalf("complete: %+v %v", d, err)
		}
	})
	status("cb-1", durable.StatusRunning)
	handle("ship")
	status("cb-1", durable.StatusSucceeded)
	if n := drain(); n != 0 {
		t.Fatalf("callback: %d messages more", n)
	}
	cbMore := park.plus(done, 1).plus(step, -1)
	t.Logf("a callback step costs more than a plain one: %d requests, %.0f WRU (%.0f table, %.0f by_status, %.0f by_due), %.0f RRU",
		cbMore.requests, cbMore.wru(), cbMore.table, cbMore.byStatus, cbMore.byDue, cbMore.rru)

	// An await whose signal wakes it.
	start(await, "aw-1")
	awaitPark := measure("pay's step, whose transition parks the saga on the await", func() { handle("pay") })
	status("aw-1", durable.StatusWaiting)
	signal := measure("the signal applied (Signal), ship's message sent", func() {
		d, err := coord.Signal(ctx, &engine.SignalParams{SagaID: "aw-1", Name: "approval", Payload: map[string]any{"ok": true}, ID: "sig-1"})
		if err != nil || d.Receipt != saga.ReceiptApplied {
			t.Fatalf("signal: %+v %v", d, err)
		}
	})
	status("aw-1", durable.StatusRunning)
	handle("ship")
	if n := drain(); n != 0 {
		t.Fatalf("await: %d messages more", n)
	}
	awMore := awaitPark.plus(signal, 1).plus(step, -1)
	t.Logf("an await that waits costs: %d requests, %.0f WRU (%.0f table, %.0f by_status, %.0f by_due), %.0f RRU",
		awMore.requests, awMore.wru(), awMore.table, awMore.byStatus, awMore.byDue, awMore.rru)

	// An await whose signal came first: kept, then taken by pay's transition.
	start(await, "aw-2")
	kept := measure("the signal kept (Signal before the await)", func() {
		d, err := coord.Signal(ctx, &engine.SignalParams{SagaID: "aw-2", Name: "approval", Payload: map[string]any{"ok": true}, ID: "sig-2"})
		if err != nil || d.Receipt != saga.ReceiptKept {
			t.Fatalf("signal: %+v %v", d, err)
		}
	})
	taken := measure("pay's step, whose transition takes the kept signal and goes on to ship", func() { handle("pay") })
	status("aw-2", durable.StatusRunning)
	// A keep sends nothing: the messages in flight stay valid.
	if n := kept.ops["SQS.SendMessage"]; n != 0 {
		t.Errorf("the keep sent %d messages, want none", n)
	}
	handle("ship")
	status("aw-2", durable.StatusSucceeded)
	if n := drain(); n != 0 {
		t.Fatalf("kept: %d messages more", n)
	}
	keptMore := kept.plus(taken, 1).plus(step, -1)
	t.Logf("an await whose signal was kept first costs: %d requests, %.0f WRU (%.0f table, %.0f by_status, %.0f by_due), %.0f RRU",
		keptMore.requests, keptMore.wru(), keptMore.table, keptMore.byStatus, keptMore.byDue, keptMore.rru)

	// What the cost model says, and what was measured, agree: a plain step
	// bills 1 WRU; a callback step, and an await that waits, 7 WRU and 2
	// requests more (the deliverer's read and write; the next step's send
	// moves to it); a kept signal is one write of the whole item, on no
	// index, and its await parks nothing.
	if step.requests != 5 || step.wru() != 1 {
		t.Errorf("a plain step: %s; want 5 requests, 1 WRU", step)
	}
	for _, m := range []struct {
		name string
		more bill
	}{{"a callback step", cbMore}, {"an await that waits", awMore}} {
		if m.more.requests != 2 || m.more.table != 1 || m.more.byStatus != 4 || m.more.byDue != 2 || m.more.rru != 1 {
			t.Errorf("%s costs %d requests, %.0f table, %.0f by_status, %.0f by_due WRU, %.0f RRU more than a plain step; want 2, 1, 4, 2, 1", m.name, m.more.requests, m.more.table, m.more.byStatus, m.more.byDue, m.more.rru)
		}
	}
	if kept.ops["DynamoDB.PutItem"] != 1 || kept.table != 1 || kept.byStatus+kept.byDue != 0 || taken.wru() != step.wru() {
		t.Errorf("a kept signal: %s, then its await's step %s; want one write of 1 WRU on the table and none on the indexes, and a step like a plain one", kept, taken)
	}
	walk := func(plan *saga.Plan, first bool) *cost.Saga {
		t.Helper()
		s, err := cost.Walk(plan, cost.Params{SignalsFirst: first}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := walk(plain, false)
	for _, m := range []struct {
		name  string
		model *cost.Saga
		more  bill
	}{{"callback", walk(callback, false), cbMore}, {"await", walk(await, false), awMore},
		// A kept signal: its read and write.
		{"a signal kept first", walk(await, true), kept.plus(taken, 1).plus(step, -1)}} {
		reads, writes := m.model.Unchained.DynamoReads-base.Unchained.DynamoReads, m.model.DynamoWrites-base.DynamoWrites
		index := m.model.IndexWRU - base.IndexWRU
		if reads != m.more.ops["DynamoDB.GetItem"] || writes != 1 || index != m.more.byStatus+m.more.byDue {
			t.Errorf("the cost model prices %s at %d reads, %d writes, %g index WRU more than a plain step; measured %s", m.name, reads, writes, index, m.more)
		}
		// With chains, pay's message carries ship in the plain saga and
		// in the one whose signal came first; after a callback or a
		// signal, ship is a message of its own: one read more.
		more := 0
		if m.model.SignalsKept == 0 {
			more = 1
		}
		if r := m.model.DynamoReads - base.DynamoReads; r != reads+more {
			t.Errorf("with chains, the cost model prices %s at %d reads more than a plain step; want %d", m.name, r, reads+more)
		}
	}
}
