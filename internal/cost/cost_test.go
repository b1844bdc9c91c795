package cost_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/cost"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

var orderInput = map[string]any{"order_id": "o", "customer": "c", "amount": 1.0, "currency": "EUR", "card": "4242", "items": []any{"a"}}

func orderPlan(t *testing.T) *saga.Plan {
	t.Helper()
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// linearPlan is n compensable action steps in a row.
func linearPlan(t *testing.T, n int) *saga.Plan {
	t.Helper()
	var b strings.Builder
	b.WriteString("saga: linear\nsteps:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {id: s%d, action: svc.do, compensate: {action: svc.undo}}\n", i)
	}
	plan, err := saga.Compile("linear.yaml", []byte(b.String()), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestOrderSagaCost(t *testing.T) {
	plan := orderPlan(t)
	p := cost.Params{MemoryMB: 256, Duration: 10 * time.Millisecond, StateBytes: 600, BatchSize: 1, Input: orderInput}
	s, err := cost.Walk(plan, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	// reserve, price, charge, check, ship, done: three action steps, four
	// writes. reserve's message carries a chain: charge and ship are
	// chained (one step message, on the advance queue, no delay, plain
	// actions), so one message is handled: one read, a send, a receive and
	// a delete, one invocation. Without chains: three of each.
	if s.ActionSteps != 3 || s.ChainedSteps != 2 || s.Messages != 1 || s.Calls != 3 || s.DynamoWrites != 4 || s.DynamoReads != 1 || s.SQSRequests != 3 || s.LambdaInvokes != 1 || s.SFNTransitions != 6 || len(s.Path) != 6 {
		t.Fatalf("%+v", s)
	}
	if u := s.Unchained; u.Messages != 3 || u.DynamoReads != 3 || u.SQSRequests != 9 || u.LambdaInvokes != 3 {
		t.Fatalf("without chains: %+v", u)
	}
	if want := []string{"running", "running", "running", "succeeded"}; !slices.Equal(s.Statuses, want) {
		t.Fatalf("statuses %v, want %v", s.Statuses, want)
	}
	// 4 WRU on the table (a 600-byte state and its attributes fit in 1 KB),
	// 3 on the index: 1 for the create, 0 for the two transitions that stay
	// running, 2 for running -> succeeded. 7 in all.
	if s.TableWRU != 4 || s.IndexWRU != 3 || s.StatusChanges != 1 {
		t.Fatalf("table %v, index %v write units, %d status changes; want 4, 3, 1", s.TableWRU, s.IndexWRU, s.StatusChanges)
	}
	// The writes and the compute are the same with chains and without.
	want := 1*0.2/1e6 + 3*0.01*0.25*0.0000133334 + 3*0.4/1e6 + (4+3)*0.625/1e6 + 1*0.125/1e6
	if !near(s.CostLambdaSaga, want) {
		t.Fatalf("cost %v, want %v", s.CostLambdaSaga, want)
	}
	unchained := 3*0.2/1e6 + 3*0.01*0.25*0.0000133334 + 9*0.4/1e6 + (4+3)*0.625/1e6 + 3*0.125/1e6
	if !near(s.Unchained.CostLambdaSaga, unchained) {
		t.Fatalf("cost without chains %v, want %v", s.Unchained.CostLambdaSaga, unchained)
	}
	if s.CostStepFnsSaga != 6*25.0/1e6 {
		t.Fatalf("step functions transitions %v", s.CostStepFnsSaga)
	}
	var b strings.Builder
	s.Report(&b, "order", 1e6)
	for _, line := range []string{"statuses written: running x3, succeeded (1 status change(s))", "3 on the by_status index", "lambdasaga without chains ", "Step Functions Standard ", "Step Functions Express ", "Lambda durable functions "} {
		if !strings.Contains(b.String(), line) {
			t.Fatalf("report lacks %q:\n%s", line, b.String())
		}
	}
}

// The index rule follows the statuses the walk produces: 1 unit at the
// create, 2 at each transition whose status differs from the one before, 0
// when it keeps it, whatever the path.
func TestIndexWritesFollowStatusChanges(t *testing.T) {
	plan := orderPlan(t)
	for _, tt := range []struct {
		name      string
		fail      func(saga.Call) bool
		transient func(saga.Call) bool
		statuses  []string
		table     float64
		index     float64
	}{
		{name: "succeeds", statuses: []string{"running", "running", "running", "succeeded"}, table: 4, index: 3},
		{
			// running -> compensating -> compensated: 1 + 2 + 2.
			name:     "ship fails",
			fail:     func(c saga.Call) bool { return c.Step == "ship" && !c.Compensation },
			statuses: []string{"running", "running", "running", "compensating", "compensating", "compensated"},
			table:    6, index: 5,
		},
		{
			// A retry is a transition that stays running: a table write, no
			// index write.
			name:      "reserve retried once",
			transient: func(c saga.Call) bool { return c.Step == "reserve" && c.Attempt == 1 },
			statuses:  []string{"running", "running", "running", "running", "succeeded"},
			table:     5, index: 3,
		},
		{
			// The refund fails for good: compensating -> compensation_failed.
			name:     "refund fails",
			fail:     func(c saga.Call) bool { return c.Step == "ship" || (c.Step == "charge" && c.Compensation) },
			statuses: []string{"running", "running", "running", "compensating", "compensation_failed"},
			table:    5, index: 5,
		},
		{
			// reserve fails for good: nothing to undo, running -> compensated.
			name:     "reserve fails",
			fail:     func(c saga.Call) bool { return c.Step == "reserve" },
			statuses: []string{"running", "compensated"},
			table:    2, index: 3,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := cost.Params{StateBytes: 600, Input: orderInput, Transient: tt.transient}
			s, err := cost.Walk(plan, p, tt.fail)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Statuses, tt.statuses) {
				t.Fatalf("statuses %v, want %v", s.Statuses, tt.statuses)
			}
			if s.TableWRU != tt.table || s.IndexWRU != tt.index {
				t.Fatalf("table %v, index %v write units; want %v, %v", s.TableWRU, s.IndexWRU, tt.table, tt.index)
			}
		})
	}
	// The retry is counted where each service bills it.
	s, err := cost.Walk(plan, cost.Params{Input: orderInput, Transient: func(c saga.Call) bool { return c.Step == "reserve" && c.Attempt == 1 }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Retries != 1 || s.Calls != 4 || s.ActionSteps != 4 || s.SFNTransitions != 7 || s.RetryWait < 50*time.Millisecond || s.RetryWait > 100*time.Millisecond {
		t.Fatalf("retries %d, calls %d, action steps %d, transitions %d, wait %v", s.Retries, s.Calls, s.ActionSteps, s.SFNTransitions, s.RetryWait)
	}
}

// A 10-step linear saga: 11 table writes, 3 index units (the create, then
// running -> succeeded at the last), 14 in all.
func TestLinearSagaWriteUnits(t *testing.T) {
	s, err := cost.Walk(linearPlan(t, 10), cost.Params{StateBytes: 480}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Transitions != 11 || s.TableWRU != 11 || s.IndexWRU != 3 || s.TableWRU+s.IndexWRU != 14 {
		t.Fatalf("%d transitions, %v + %v write units; want 11, 11 + 3", s.Transitions, s.TableWRU, s.IndexWRU)
	}
}

// The item is its state and a few hundred bytes of keys and attributes, as
// DynamoDB sizes items: a state just under 1 KB takes the item past it, and
// each write then bills 2 units on the table; the index entry, which holds
// no state, still bills 1.
func TestItemOverheadCountsTowardWriteUnits(t *testing.T) {
	plan := orderPlan(t)
	s, err := cost.Walk(plan, cost.Params{StateBytes: 1000, Input: orderInput}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.ItemOverheadBytes < 200 || s.ItemOverheadBytes > 400 || s.ItemBytes != 1000+s.ItemOverheadBytes {
		t.Fatalf("item %d bytes, overhead %d", s.ItemBytes, s.ItemOverheadBytes)
	}
	if s.TableWRU != 8 || s.IndexWRU != 3 || s.IndexEntryBytes >= 1024 {
		t.Fatalf("table %v, index %v write units, entry %d bytes; want 8, 3, under 1 KB", s.TableWRU, s.IndexWRU, s.IndexEntryBytes)
	}
	// Longer saga ids make a bigger item: the id is in pk and gsi1sk.
	long, err := cost.Walk(plan, cost.Params{StateBytes: 1000, SagaIDBytes: 100, Input: orderInput}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if long.ItemOverheadBytes != s.ItemOverheadBytes+2*(100-36) {
		t.Fatalf("overhead %d with 100-byte ids, %d with 36", long.ItemOverheadBytes, s.ItemOverheadBytes)
	}
}

// Each comparison's arithmetic, from the counts and ListPrices.
func TestComparisons(t *testing.T) {
	plan := orderPlan(t)
	p := cost.Params{MemoryMB: 512, Duration: 40 * time.Millisecond, Input: orderInput}
	s, err := cost.Walk(plan, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Comparisons) != 3 {
		t.Fatalf("%+v", s.Comparisons)
	}
	std, exp, dur := s.Comparisons[0], s.Comparisons[1], s.Comparisons[2]
	actions := 3 * (0.2/1e6 + 0.04*0.5*0.0000133334) // 3 invocations of 40 ms at 512 MB
	// Standard: 6 transitions at $25 per million.
	if std.Name != "step_functions_standard" || std.BilledUnits != 6 || !near(std.OrchestrationUSD, 6*25.0/1e6) || !near(std.LambdaUSD, actions) || !near(std.TotalUSD, std.OrchestrationUSD+std.LambdaUSD) {
		t.Errorf("standard %+v", std)
	}
	// Express: 1 request, 120 ms rounded up to 200 ms, at 64 MB.
	if d := s.ExpressDuration(); d != 200*time.Millisecond {
		t.Errorf("express duration %v, want 200ms", d)
	}
	if exp.Name != "step_functions_express" || !exp.Fits || exp.BilledUnits != 1 || !near(exp.OrchestrationUSD, 1.0/1e6+0.2*64/1024*0.06/3600) || !near(exp.LambdaUSD, actions) {
		t.Errorf("express %+v", exp)
	}
	// Durable functions: 3 operations at $8 per million, one invocation
	// running 3 calls.
	if dur.Name != "lambda_durable_functions" || dur.BilledUnits != 3 || !near(dur.OrchestrationUSD, 3*8.0/1e6) || !near(dur.LambdaUSD, 0.2/1e6+3*0.04*0.5*0.0000133334) {
		t.Errorf("durable %+v", dur)
	}
	// A saga whose retries wait past 5 minutes does not fit Express.
	long, err := cost.Walk(plan, cost.Params{Duration: 101 * time.Second, Input: orderInput}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if long.Comparisons[1].Fits || !long.Comparisons[0].Fits {
		t.Errorf("303 s of calls: express fits %v, standard %v", long.Comparisons[1].Fits, long.Comparisons[0].Fits)
	}
}

// TestWalkRefusesFiguresThatCannotBe: a negative or non-finite figure
// would print a negative or NaN cost; zero still means the default.
func TestWalkRefusesFiguresThatCannotBe(t *testing.T) {
	plan := orderPlan(t)
	for _, tt := range []struct {
		p     cost.Params
		field string
	}{
		{cost.Params{BatchSize: math.NaN()}, "BatchSize"},
		{cost.Params{BatchSize: math.Inf(1)}, "BatchSize"},
		{cost.Params{BatchSize: -2}, "BatchSize"},
		{cost.Params{MemoryMB: -256}, "MemoryMB"},
		{cost.Params{Duration: -time.Millisecond}, "Duration"},
		{cost.Params{StateBytes: -1}, "StateBytes"},
		{cost.Params{MessageBytes: -1}, "MessageBytes"},
		{cost.Params{SagaIDBytes: -1}, "SagaIDBytes"},
	} {
		tt.p.Input = orderInput
		s, err := cost.Walk(plan, tt.p, nil)
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%+v: got %+v, %v; want an error naming %s", tt.p, s, err, tt.field)
		}
	}
	if _, err := cost.Walk(plan, cost.Params{Input: orderInput}, nil); err != nil {
		t.Fatalf("zero figures take the defaults: %v", err)
	}
}

// The same walk gives the same figures to the last bit: the breakdown is a
// map, and adding its parts in map order made the total vary.
func TestWalkIsDeterministic(t *testing.T) {
	plan := orderPlan(t)
	p := cost.Params{MemoryMB: 1769, Duration: 137 * time.Millisecond, StateBytes: 3333, BatchSize: 7, Input: orderInput}
	first, err := cost.Walk(plan, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		s, err := cost.Walk(plan, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.CostLambdaSaga != first.CostLambdaSaga {
			t.Fatalf("total %v, then %v", first.CostLambdaSaga, s.CostLambdaSaga)
		}
	}
}

// A wait costs its timer: a message handled (no action), a read, a write,
// the tick's read of the saga when it is longer than a queue's delay (36h:
// reads 2 + 1 + 1), its by_due entry put and deleted, and two moves of its by_status entry
// (running to waiting and back); Step Functions counts it as one state,
// durable functions as one operation, and Express cannot run a saga that
// waits past 5 minutes.
func TestWalkCostsAWait(t *testing.T) {
	plan, err := saga.Compile("w.yaml", []byte("saga: w\nsteps:\n  - {id: a, action: x}\n  - {id: pause, wait: {for: 36h}}\n  - {id: b, action: y}\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cost.Walk(plan, cost.Params{StateBytes: 300}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Timers != 1 || s.WaitTime != 36*time.Hour || s.ActionSteps != 2 || s.DynamoReads != 4 || s.TickedTimers != 1 || s.Transitions != 4 {
		t.Fatalf("timers %d, wait %s, action steps %d, reads %d, transitions %d", s.Timers, s.WaitTime, s.ActionSteps, s.DynamoReads, s.Transitions)
	}
	short, err := saga.Compile("w.yaml", []byte("saga: w\nsteps:\n  - {id: a, action: x}\n  - {id: pause, wait: {for: 10m}}\n  - {id: b, action: y}\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ss, err := cost.Walk(short, cost.Params{StateBytes: 300}, nil); err != nil || ss.TickedTimers != 0 || ss.DynamoReads != 3 {
		t.Fatalf("a 10-minute wait (its own delayed message, no tick): %+v %v", ss, err)
	}
	// by_status: 1 (start) + 2 (to waiting) + 2 (to running) + 2 (to succeeded); by_due: 2.
	if s.IndexWRU != 9 || s.SFNTransitions != 3 {
		t.Fatalf("index WRU %v, SFN transitions %d; want 9 and 3", s.IndexWRU, s.SFNTransitions)
	}
	for _, c := range s.Comparisons {
		if c.Name == "step_functions_express" && c.Fits {
			t.Fatal("Express fits a saga that waits 36 hours")
		}
		if c.Name == "lambda_durable_functions" && c.BilledUnits != 3 {
			t.Fatalf("durable operations %v, want 3 (two calls, one wait)", c.BilledUnits)
		}
	}
}

// A callback step costs, beyond its action: the completer's read and
// write, the by_status entry's two moves (running to waiting and back) and
// the by_due entry put and deleted; a timeout within 15 minutes adds its
// timer message, which comes after the completion and is read and
// dropped. Step Functions counts one .waitForTaskToken state, durable
// functions one callback operation and one more invocation, and Express
// cannot run it.
func TestWalkCostsACallback(t *testing.T) {
	for _, tc := range []struct {
		timeout      string
		stale, reads int
		sqs, invokes float64
	}{
		{"1h", 0, 3, 6, 2},
		{"10m", 1, 4, 9, 3},
	} {
		plan, err := saga.Compile("cb.yaml", []byte("saga: cb\nsteps:\n  - {id: pay, action: x, callback: {timeout: "+tc.timeout+"}}\n  - {id: ship, action: y}\n"), saga.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := cost.Walk(plan, cost.Params{StateBytes: 300}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Callbacks != 1 || s.Parked != 1 || s.StaleTimers != tc.stale || s.Timers != 0 || s.ActionSteps != 2 || s.DynamoReads != tc.reads {
			t.Fatalf("timeout %s: callbacks %d, parked %d, stale timers %d, timers %d, action steps %d, reads %d", tc.timeout, s.Callbacks, s.Parked, s.StaleTimers, s.Timers, s.ActionSteps, s.DynamoReads)
		}
		if !slices.Equal(s.Statuses, []string{"running", "waiting", "running", "succeeded"}) || s.DynamoWrites != 4 {
			t.Fatalf("timeout %s: statuses %v, writes %d", tc.timeout, s.Statuses, s.DynamoWrites)
		}
		// by_status: 1 (start) + 2 (to waiting) + 2 (to running) + 2 (to succeeded); by_due: 2.
		if s.IndexWRU != 9 || s.SFNTransitions != 2 || s.SQSRequests != tc.sqs || s.LambdaInvokes != tc.invokes {
			t.Fatalf("timeout %s: index WRU %v, SFN transitions %d, SQS %v, invocations %v", tc.timeout, s.IndexWRU, s.SFNTransitions, s.SQSRequests, s.LambdaInvokes)
		}
		for _, c := range s.Comparisons {
			if c.Name == "step_functions_express" && c.Fits {
				t.Fatal("Express fits a saga with a callback step")
			}
			if c.Name == "lambda_durable_functions" && c.BilledUnits != 3 {
				t.Fatalf("durable operations %v, want 3 (two calls, one callback)", c.BilledUnits)
			}
		}
	}
}

// An await costs the signal's read and write and, when it waits, the
// by_status entry's two moves and the by_due entry; a signal kept before
// its await is one write that keeps the status, and the await then does
// not wait: no index write at all.
func TestWalkCostsAnAwait(t *testing.T) {
	plan, err := saga.Compile("aw.yaml", []byte("saga: aw\nsteps:\n  - {id: ask, action: x}\n  - {id: approve, await: {signal: approval, timeout: 72h}, out: answer}\n  - {id: book, action: y}\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		first    bool
		statuses []string
		index    float64
		parked   int
		kept     int
		invokes  float64 // of the durable function
		// A signal kept first is taken by ask's transition, which goes on
		// to book: book is chained, and ask's message the only one (a
		// read, 3 SQS requests). A signal that wakes the await writes the
		// transition before book: book is a message (2 messages, 3 reads
		// with the sender's).
		reads int
		sqs   float64
	}{
		{false, []string{"running", "waiting", "running", "succeeded"}, 9, 1, 0, 2, 3, 6},
		{true, []string{"running", "running", "running", "succeeded"}, 3, 0, 1, 1, 2, 3},
	} {
		s, err := cost.Walk(plan, cost.Params{StateBytes: 300, SignalsFirst: tc.first}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Signals != 1 || s.SignalsKept != tc.kept || s.Parked != tc.parked || s.StaleTimers != 0 || s.DynamoReads != tc.reads || s.DynamoWrites != 4 || !slices.Equal(s.Statuses, tc.statuses) {
			t.Fatalf("signals first %v: signals %d (kept %d), parked %d, stale %d, reads %d, writes %d, statuses %v", tc.first, s.Signals, s.SignalsKept, s.Parked, s.StaleTimers, s.DynamoReads, s.DynamoWrites, s.Statuses)
		}
		if s.IndexWRU != tc.index || s.SQSRequests != tc.sqs || s.Unchained.DynamoReads != 3 || s.Unchained.SQSRequests != 6 || !slices.Equal(s.Path, []string{"ask", "approve", "book"}) {
			t.Fatalf("signals first %v: index WRU %v, SQS %v (%v without chains), path %v", tc.first, s.IndexWRU, s.SQSRequests, s.Unchained.SQSRequests, s.Path)
		}
		for _, c := range s.Comparisons {
			if c.Name == "lambda_durable_functions" && (c.BilledUnits != 3 || !strings.Contains(c.Counts, fmt.Sprintf("invoked %g time(s)", tc.invokes))) {
				t.Fatalf("durable: %v operations, %s", c.BilledUnits, c.Counts)
			}
		}
	}
}

// TestStartQueuePricesEachRequest: through the start queue, the start and
// each delivery are a message more (a send, a receive and a delete per
// batch), an invocation's share and Duration of compute; nothing else
// changes.
func TestStartQueuePricesEachRequest(t *testing.T) {
	plan, in := expensePlan(t), claim
	for _, batch := range []float64{1, 10} {
		direct, err := cost.Walk(plan, cost.Params{Input: in, BatchSize: batch, Signals: map[string]any{"approved": map[string]any{"approved": true, "by": "m"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		queued, err := cost.Walk(plan, cost.Params{Input: in, BatchSize: batch, Signals: map[string]any{"approved": map[string]any{"approved": true, "by": "m"}}, StartQueue: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		requests := 1 + direct.Signals + direct.Callbacks
		if direct.Signals == 0 || queued.QueueRequests != requests || direct.QueueRequests != 0 {
			t.Fatalf("batch %g: %d signals, %d queue requests (direct %d)", batch, direct.Signals, queued.QueueRequests, direct.QueueRequests)
		}
		if got, want := queued.Priced.Messages, direct.Priced.Messages+requests; got != want {
			t.Errorf("batch %g: messages %d, want %d", batch, got, want)
		}
		if got, want := queued.Priced.SQSRequests-direct.Priced.SQSRequests, float64(requests)*(1+2/batch); math.Abs(got-want) > 1e-9 {
			t.Errorf("batch %g: %g more SQS requests, want %g", batch, got, want)
		}
		if got, want := queued.Priced.LambdaInvokes-direct.Priced.LambdaInvokes, float64(requests)/batch; math.Abs(got-want) > 1e-9 {
			t.Errorf("batch %g: %g more invocations, want %g", batch, got, want)
		}
		if queued.TableWRU != direct.TableWRU || queued.IndexWRU != direct.IndexWRU || queued.Priced.DynamoReads != direct.Priced.DynamoReads {
			t.Errorf("batch %g: DynamoDB differs: %g/%g WRU, %d reads; direct %g/%g, %d", batch, queued.TableWRU, queued.IndexWRU, queued.Priced.DynamoReads,
				direct.TableWRU, direct.IndexWRU, direct.Priced.DynamoReads)
		}
		if queued.CostLambdaSaga <= direct.CostLambdaSaga {
			t.Errorf("batch %g: the start queue costs nothing: %g vs %g", batch, queued.CostLambdaSaga, direct.CostLambdaSaga)
		}
	}
}

// TestLargeValuesPricedAsObjectsOrInline: a value over the threshold is a
// PUT, a GET per step handled from its message and its storage, and a
// reference in the item; at or under it, its bytes in every write and
// read of the item.
func TestLargeValuesPricedAsObjectsOrInline(t *testing.T) {
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	walk := func(p cost.Params) *cost.Saga {
		t.Helper()
		p.Input, p.ChainSteps = orderInput, -1 // each step a message of its own
		s, err := cost.Walk(plan, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	plain := walk(cost.Params{})
	const mib = 1 << 20
	byRef := walk(cost.Params{LargeValues: 1, LargeValueBytes: mib})
	if !byRef.Params.Offloaded() || byRef.Priced.ObjectPuts != 1 || byRef.Priced.ObjectGets != byRef.ActionSteps {
		t.Fatalf("by reference: offloaded %v, %d PUTs, %d GETs for %d steps", byRef.Params.Offloaded(), byRef.Priced.ObjectPuts, byRef.Priced.ObjectGets, byRef.ActionSteps)
	}
	for _, cmp := range byRef.Comparisons {
		if cmp.Fits || !strings.Contains(cmp.Counts, "payload limit") {
			t.Errorf("%s fits a 1 MiB value: %s", cmp.Name, cmp.Counts)
		}
	}
	// A 40-byte reference: the item stays in its write unit.
	if byRef.TableWRU != plain.TableWRU {
		t.Errorf("by reference: %g table WRU, without the value %g", byRef.TableWRU, plain.TableWRU)
	}
	// Its end: one message more, which reads the saga, LISTs its prefix
	// and COPYs its object with the ended tag.
	if byRef.Priced.ObjectLists != 1 || byRef.Priced.ObjectCopies != 1 || byRef.ExpireMessages != 1 || plain.ExpireMessages != 0 {
		t.Errorf("by reference: %d LISTs, %d COPYs, %d expire messages (%d without the value); want 1, 1, 1 (0)",
			byRef.Priced.ObjectLists, byRef.Priced.ObjectCopies, byRef.ExpireMessages, plain.ExpireMessages)
	}
	pr := cost.ListPrices
	wantS3 := 3*pr.S3PerThousandPuts/1e3 + float64(byRef.ActionSteps)*pr.S3PerThousandGets/1e3
	if got := byRef.CostBreakdownUSD["s3 requests"]; math.Abs(got-wantS3) > 1e-15 {
		t.Errorf("s3 requests: $%g, want $%g", got, wantS3)
	}
	wantStorage := 1.0 / 1024 * pr.S3PerGBMonth * 30 * 12 / 365 // RetentionDays after the end
	if got := byRef.CostBreakdownUSD["s3 storage"]; math.Abs(got-wantStorage) > 1e-15 {
		t.Errorf("s3 storage: $%g, want $%g", got, wantStorage)
	}
	// 20 KB at a 64 KiB threshold: inline, 20 write units more per write.
	inline := walk(cost.Params{LargeValues: 1, LargeValueBytes: 20 << 10, OffloadBytes: 64 << 10})
	if inline.Params.Offloaded() || inline.Priced.ObjectPuts != 0 || inline.CostBreakdownUSD["s3 requests"] != 0 {
		t.Fatalf("inline: offloaded %v, %d PUTs", inline.Params.Offloaded(), inline.Priced.ObjectPuts)
	}
	if got, want := inline.TableWRU-plain.TableWRU, float64(20*inline.Transitions); got != want {
		t.Errorf("inline: %g table WRU more, want %g (20 per write)", got, want)
	}
	// The same 20 KB at the default threshold goes by reference, and costs less.
	dflt := walk(cost.Params{LargeValues: 1, LargeValueBytes: 20 << 10})
	if !dflt.Params.Offloaded() || dflt.CostLambdaSaga >= inline.CostLambdaSaga {
		t.Errorf("20 KB at the default threshold: offloaded %v, $%g against $%g inline", dflt.Params.Offloaded(), dflt.CostLambdaSaga, inline.CostLambdaSaga)
	}
	// Inline past the state's limit: refused, saying why.
	if _, err := cost.Walk(plan, cost.Params{Input: orderInput, LargeValues: 1, LargeValueBytes: mib, OffloadBytes: 2 * mib}, nil); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("1 MiB inline: %v", err)
	}
}
