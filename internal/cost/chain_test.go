package cost_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/cost"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

// stepLine is a step run as the tests below write it: "s1 chained",
// "s0 message: first step after the start", "pause wait"; a compensation
// is "s2/compensation", a retry "b#2", a child's step "child one".
func stepLine(r cost.StepRun) string {
	l := r.Step
	if r.Kind == "compensation" || r.Kind == "finding out" {
		l += "/" + r.Kind
	}
	if r.Attempt > 1 {
		l += fmt.Sprintf("#%d", r.Attempt)
	}
	if r.Child {
		l = "child " + l
	}
	switch {
	case r.Chained:
		return l + " chained"
	case r.Attempt > 0:
		return l + " message: " + r.Why
	}
	return l + " " + r.Kind
}

// compile builds a plan from YAML lines.
func compile(t *testing.T, lines ...string) *saga.Plan {
	t.Helper()
	plan, err := saga.Compile("c.yaml", []byte(strings.Join(lines, "\n")+"\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestChainedSteps prices paths whose steps chain, by the engine's rule
// (docs/PROTOCOL.md, "Chains"): after a message's action step is written,
// each following action step whose outbox is one step message on the same
// queue with no delay, and which is not a callback step, runs at once: its
// write alone. The counts are as AWS bills them, per saga, at the defaults
// (batch size 1, 10 ms actions) and a 300-byte state, so every item is
// under 1 KB (1 write unit on the table per write, 1 read unit per read)
// and every index entry too (1 unit per index write).
//
// Throughout: a message costs an SQS send, a receive and a delete (3
// requests at batch size 1), one Lambda invocation and, for an action
// step, one strongly consistent GetItem. A chained step costs none of
// these; its write is the same as without chains, so the write units
// never change with chaining. Without chains each action step is a
// message.
func TestChainedSteps(t *testing.T) {
	for _, tt := range []struct {
		name      string
		plan      *saga.Plan
		p         cost.Params
		fail      func(saga.Call) bool
		steps     []string
		chained   int
		messages  int // handled with chains; the unchained are messages+chained
		reads     int // GetItems with chains; without them, reads+chained
		writes    int
		table     float64
		index     float64
		sqs       float64 // with chains
		invokes   float64 // with chains
		unSQS     float64 // without chains
		unInvokes float64 // without chains
	}{
		{
			// Ten plain actions: s0's message carries a chain of the nine
			// others (under the 50-step limit; nine 10 ms actions use 90
			// ms of the 5 s budget and of the invocation's first second).
			name: "linear, 10 actions",
			plan: linearPlan(t, 10),
			steps: []string{"s0 message: first step after the start",
				"s1 chained", "s2 chained", "s3 chained", "s4 chained", "s5 chained", "s6 chained", "s7 chained", "s8 chained", "s9 chained"},
			chained: 9,
			// One message (s0's): its read, 3 SQS requests, 1 invocation.
			messages: 1, reads: 1, sqs: 3, invokes: 1,
			// The start and ten transitions, 1 unit each on the table; the
			// by_status entry put at the start (1) and moved when the saga
			// succeeds (2).
			writes: 11, table: 11, index: 3,
			// Without chains: ten messages, 30 requests, 10 invocations.
			unSQS: 30, unInvokes: 10,
		},
		{
			// The wait's timer is a message (the tick's: 36 h is past
			// SQS's 15-minute delay), whose transition is a timer's, not
			// an action step's: c after it is a message again.
			name: "a wait in the middle",
			plan: compile(t, "saga: w", "steps:",
				"  - {id: a, action: x}", "  - {id: b, action: x}",
				"  - {id: pause, wait: {for: 36h}}",
				"  - {id: c, action: y}", "  - {id: d, action: y}"),
			steps:   []string{"a message: first step after the start", "b chained", "pause wait", "c message: after a wait", "d chained"},
			chained: 2,
			// Messages: a's, the timer's, c's. Reads: a, c, the timer's
			// message and the tick's read of the saga.
			messages: 3, reads: 4, sqs: 9, invokes: 3,
			// Writes: the start, a, b (parks: waiting), the timer (wakes:
			// running), c, d (succeeded). by_status: 1 at the start, 2 to
			// waiting, 2 back to running, 2 to succeeded; by_due: the
			// timer's entry put and deleted, 2.
			writes: 6, table: 6, index: 1 + 2 + 2 + 2 + 2,
			// Without chains: five messages (a, b, c, d, the timer).
			unSQS: 15, unInvokes: 5,
		},
		{
			// A callback step never chains (its action starts work the
			// saga then waits for); the completion's write sends ship's
			// message, which carries bill.
			name: "a callback step",
			plan: compile(t, "saga: cb", "steps:",
				"  - {id: a, action: x}",
				"  - {id: pay, action: x, callback: {timeout: 1h}}",
				"  - {id: ship, action: y}", "  - {id: bill, action: y}"),
			steps:   []string{"a message: first step after the start", "pay message: callback step", "ship message: after a callback", "bill chained"},
			chained: 1,
			// Messages: a, pay, ship (the 1 h timeout is past 15 minutes:
			// no timer message). Reads: the three, and the completer's.
			messages: 3, reads: 4, sqs: 9, invokes: 3,
			// Writes: the start, a, pay (parks), the completion, ship,
			// bill. by_status 1 + 2 + 2 + 2, by_due 2.
			writes: 6, table: 6, index: 1 + 2 + 2 + 2 + 2,
			unSQS: 12, unInvokes: 4,
		},
		{
			// b's first attempt chains after a; it fails and is retried
			// after its backoff: a delayed message, which no chain takes.
			// The second attempt's message carries c.
			name: "a retry with backoff",
			plan: compile(t, "saga: r", "steps:",
				"  - {id: a, action: x}",
				"  - {id: b, action: flaky, retry: {attempts: 3, backoff: 100ms}}",
				"  - {id: c, action: y}"),
			p:       cost.Params{Transient: func(c saga.Call) bool { return c.Step == "b" && c.Attempt == 1 }},
			steps:   []string{"a message: first step after the start", "b chained", "b#2 message: retry backoff", "c chained"},
			chained: 2,
			// Messages: a's and b's second attempt's.
			messages: 2, reads: 2, sqs: 6, invokes: 2,
			// Writes: the start, a, b's failed attempt (running kept), b,
			// c (succeeded): by_status 1 + 2.
			writes: 5, table: 5, index: 3,
			unSQS: 12, unInvokes: 4,
		},
		{
			// s3 fails for good: the saga compensates s2, s1, s0. The
			// first compensation's message goes to the compensate queue,
			// not the advance queue of s0's message: a message of its
			// own, which carries the other two compensations.
			name: "a failure: compensations chain",
			plan: linearPlan(t, 4),
			fail: func(c saga.Call) bool { return c.Step == "s3" && !c.Compensation },
			steps: []string{"s0 message: first step after the start", "s1 chained", "s2 chained", "s3 chained",
				"s2/compensation message: first compensation", "s1/compensation chained", "s0/compensation chained"},
			chained: 5,
			// Messages: s0's and s2's compensation's.
			messages: 2, reads: 2, sqs: 6, invokes: 2,
			// Writes: the start, four steps, three compensations; statuses
			// running x4, compensating x3, compensated: by_status 1 + 2
			// (to compensating) + 2 (to compensated).
			writes: 8, table: 8, index: 5,
			unSQS: 21, unInvokes: 7,
		},
		{
			// A fork: its children run as sagas of their own, each from
			// its create, and the parent goes on from the join's message.
			// No chain crosses it: a's chain ends at the fork, each
			// child's first step is a message (its own chain carries
			// two), c after the join is a message (and carries d).
			name: "a fork",
			plan: compile(t, "saga: f", "input: {items: list}", "steps:",
				"  - {id: a, action: x}",
				"  - id: each", `    foreach: "${input.items}"`, "    steps:",
				"      - {id: one, action: svc.one}", "      - {id: two, action: svc.two}",
				"  - {id: c, action: y}", "  - {id: d, action: y}"),
			p: cost.Params{Input: map[string]any{"items": []any{"x", "y"}}},
			steps: []string{"a message: first step after the start", "each fork",
				"child one message: first step after the start", "child two chained",
				"child one message: first step after the start", "child two chained",
				"c message: after a join", "d chained"},
			chained: 3,
			// Messages: the action steps' (a, one twice, c), each child's
			// end counted in the fork record (2), the join (1), and the
			// expiry of the finished tree (1): 8. Reads: the four action
			// steps', each count's read of its child (2), the join's read
			// of the parent (1) and of each child (2), and the expiry's
			// reads of the root, its fork record and each child, for its
			// objects (4): 13.
			messages: 8, reads: 13, sqs: 24, invokes: 8,
			// Writes: the parent's five (start, a, the join, c, d); each
			// child's three (create, one, two); the two counts; the
			// expiry's three (each child and the fork record), 1 unit
			// each. The iterations have no by_status entry; the parent's
			// is put (1), moved to waiting as it forks (2), back to
			// running at the join (2), to succeeded (2).
			writes: 5 + 2*3 + 2 + 3, table: 16, index: 1 + 2 + 2 + 2,
			unSQS: 33, unInvokes: 11,
		},
		{
			// The step limit: at most ChainSteps after the message's own.
			name:  "linear, 10 actions, chains of 4",
			plan:  linearPlan(t, 10),
			p:     cost.Params{ChainSteps: 4},
			steps: []string{"s0 message: first step after the start", "s1 chained", "s2 chained", "s3 chained", "s4 chained", "s5 message: chain step limit", "s6 chained", "s7 chained", "s8 chained", "s9 chained"},
			// Two messages carry four chained steps each.
			chained: 8, messages: 2, reads: 2, sqs: 6, invokes: 2,
			writes: 11, table: 11, index: 3,
			unSQS: 30, unInvokes: 10,
		},
		{
			// The invocation's first second: an untimed step chains only
			// while the invocation is within saga.StartReserve (1 s) of its
			// start. With 300 ms actions, s3 starts 900 ms in (s0's own
			// and two chained), and s4 would start 1.2 s in: past it, so
			// s4 is a message, which starts a fresh invocation.
			name:    "linear, 10 actions of 300 ms",
			plan:    linearPlan(t, 10),
			p:       cost.Params{Duration: 300 * time.Millisecond},
			steps:   []string{"s0 message: first step after the start", "s1 chained", "s2 chained", "s3 chained", "s4 message: untimed step, invocation not fresh", "s5 chained", "s6 chained", "s7 chained", "s8 message: untimed step, invocation not fresh", "s9 chained"},
			chained: 7, messages: 3, reads: 3, sqs: 9, invokes: 3,
			writes: 11, table: 11, index: 3,
			unSQS: 30, unInvokes: 10,
		},
		{
			// Batch size 10: a chain's 5 s budget is shared with the
			// records behind it, 500 ms for the first of ten. With 200 ms
			// actions, the chain's third step starts 400 ms in, and a
			// fourth would start 600 ms in: past it. (The invocation's
			// first second would allow four: the fourth starts 800 ms in,
			// after s0's own 200 ms.) A message's
			// receive and delete serve a batch: 1 + 2/10 SQS requests and
			// 1/10 invocation per message.
			name:    "linear, 10 actions of 200 ms, batches of 10",
			plan:    linearPlan(t, 10),
			p:       cost.Params{Duration: 200 * time.Millisecond, BatchSize: 10},
			steps:   []string{"s0 message: first step after the start", "s1 chained", "s2 chained", "s3 chained", "s4 message: chain time budget", "s5 chained", "s6 chained", "s7 chained", "s8 message: chain time budget", "s9 chained"},
			chained: 7, messages: 3, reads: 3, sqs: 3 * 1.2, invokes: 3 * 0.1,
			writes: 11, table: 11, index: 3,
			unSQS: 10 * 1.2, unInvokes: 10 * 0.1,
		},
		{
			// Chaining off: every action step a message, as before chains.
			name:     "linear, 10 actions, no chains",
			plan:     linearPlan(t, 10),
			p:        cost.Params{ChainSteps: -1},
			steps:    slices.Repeat([]string{""}, 10), // filled below
			chained:  0,
			messages: 10, reads: 10, sqs: 30, invokes: 10,
			writes: 11, table: 11, index: 3,
			unSQS: 30, unInvokes: 10,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.p.ChainSteps < 0 {
				for i := range tt.steps {
					tt.steps[i] = fmt.Sprintf("s%d message: %s", i, cost.WhyOff)
				}
			}
			p := tt.p
			p.StateBytes = 300
			s, err := cost.Walk(tt.plan, p, tt.fail)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range s.Steps {
				got = append(got, stepLine(r))
			}
			if !slices.Equal(got, tt.steps) {
				t.Errorf("steps:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.steps, "\n  "))
			}
			if s.ChainedSteps != tt.chained || s.Messages != tt.messages || s.DynamoReads != tt.reads || s.RRUPerRead != 1 {
				t.Errorf("%d chained, %d messages, %d reads (%g units each); want %d, %d, %d (1)", s.ChainedSteps, s.Messages, s.DynamoReads, s.RRUPerRead, tt.chained, tt.messages, tt.reads)
			}
			if s.DynamoWrites != tt.writes || s.TableWRU != tt.table || s.IndexWRU != tt.index {
				t.Errorf("%d writes, %g + %g write units; want %d, %g + %g", s.DynamoWrites, s.TableWRU, s.IndexWRU, tt.writes, tt.table, tt.index)
			}
			if !near(s.SQSRequests, tt.sqs) || !near(s.LambdaInvokes, tt.invokes) {
				t.Errorf("%g SQS requests, %g invocations; want %g, %g", s.SQSRequests, s.LambdaInvokes, tt.sqs, tt.invokes)
			}
			// Without chains, each chained step is a message again: its
			// read, its SQS requests, its invocation.
			u := s.Unchained
			if u.Messages != tt.messages+tt.chained || u.DynamoReads != tt.reads+tt.chained || !near(u.SQSRequests, tt.unSQS) || !near(u.LambdaInvokes, tt.unInvokes) {
				t.Errorf("without chains: %d messages, %d reads, %g SQS requests, %g invocations; want %d, %d, %g, %g",
					u.Messages, u.DynamoReads, u.SQSRequests, u.LambdaInvokes, tt.messages+tt.chained, tt.reads+tt.chained, tt.unSQS, tt.unInvokes)
			}
			// The dollars, from the counts at ListPrices: only the
			// requests differ; the writes and the compute do not.
			pr := cost.ListPrices
			dollars := func(invokes, sqs float64, reads int) float64 {
				return invokes*pr.LambdaPerMillionRequests/1e6 + s.LambdaGBSeconds*pr.LambdaArmPerGBSecond + sqs*pr.SQSPerMillionRequests/1e6 +
					(tt.table+tt.index)*pr.DynamoPerMillionWRU/1e6 + float64(reads)*pr.DynamoPerMillionRRU/1e6
			}
			if want := dollars(tt.invokes, tt.sqs, tt.reads); !near(s.CostLambdaSaga, want) {
				t.Errorf("$%v per saga, want $%v", s.CostLambdaSaga, want)
			}
			if want := dollars(tt.unInvokes, tt.unSQS, tt.reads+tt.chained); !near(u.CostLambdaSaga, want) {
				t.Errorf("$%v per saga without chains, want $%v", u.CostLambdaSaga, want)
			}
		})
	}
}

// docs/COST.md's figures ("Chained steps"): linear-10
// (testdata/linear-10.yaml) with the defaults (600-byte state, 10 ms
// actions at 256 MB) per million action steps. Per saga: 14 write units
// (11 + 3) at $0.625 per million, 0.025 GB-s at $0.0000133334, and per
// message a read ($0.125 per million units), an invocation ($0.20 per
// million) and 1 + 2/batch SQS requests ($0.40 per million); one message
// with chains, ten without. Next to them: Step Functions Standard, 10
// transitions at $25 per million and the 10 actions' invocations; durable
// functions, 10 operations at $8 per million, one invocation and the
// compute; Temporal Cloud, 11 Actions (the workflow's start, 10 activities)
// at $50 and at $25 per million, nothing else counted.
func TestLinearTenPerMillionActionSteps(t *testing.T) {
	src, err := os.ReadFile("testdata/linear-10.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(src), sagatest.LinearSaga(10)) {
		t.Fatalf("testdata/linear-10.yaml is not sagatest.LinearSaga(10)")
	}
	plan, err := saga.Compile("linear-10.yaml", src, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		batch              float64
		chained, unchained float64 // USD per million action steps
	}{
		{1, 1.0608, 2.4333},
		{10, 0.9708, 1.5333},
	} {
		s, err := cost.Walk(plan, cost.Params{BatchSize: tt.batch}, nil)
		if err != nil {
			t.Fatal(err)
		}
		per := func(messages float64) float64 {
			return 1e5 * (14*0.625/1e6 + 0.025*0.0000133334 + messages*(0.125/1e6+0.2/1e6/tt.batch+(1+2/tt.batch)*0.4/1e6))
		}
		got, gotU := s.PerMillionActionSteps(s.CostLambdaSaga), s.PerMillionActionSteps(s.Unchained.CostLambdaSaga)
		if !near(got, per(1)) || !near(gotU, per(10)) || fmt.Sprintf("%.4f %.4f", got, gotU) != fmt.Sprintf("%.4f %.4f", tt.chained, tt.unchained) {
			t.Errorf("batch %g: $%.4f with chains, $%.4f without; want $%.4f and $%.4f", tt.batch, got, gotU, tt.chained, tt.unchained)
		}
		var others []string
		for _, c := range s.Comparisons {
			others = append(others, fmt.Sprintf("%s $%.2f", c.Name, s.PerMillionActionSteps(c.TotalUSD)))
		}
		if got, want := strings.Join(others, ", "), "step_functions_standard $25.23, step_functions_express $0.34, lambda_durable_functions $8.05"; got != want {
			t.Errorf("batch %g: %s; want %s", tt.batch, got, want)
		}
	}
	pr := cost.ListPrices
	actions := 1.0 + 10 // per saga: the workflow's start and 10 activities
	if hi, lo := actions/10*pr.TemporalCloudPerMillionActions, actions/10*pr.TemporalCloudPerMillionActionsAtVolume; fmt.Sprintf("$%.2f $%.2f", hi, lo) != "$55.00 $27.50" {
		t.Errorf("Temporal Cloud: $%.2f to $%.2f per million action steps; docs/COST.md says $55.00 to $27.50", hi, lo)
	}
}

// The report says which steps chain and why not, and prices the path
// without chains beside: the same every run.
func TestReportShowsChains(t *testing.T) {
	plan := compile(t, "saga: w", "steps:",
		"  - {id: a, action: x}", "  - {id: b, action: x}",
		"  - {id: pause, wait: {for: 36h}}",
		"  - {id: c, action: y}", "  - {id: d, action: y}")
	var first string
	for range 20 {
		s, err := cost.Walk(plan, cost.Params{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		s.Report(&b, "w", 1e6)
		if first == "" {
			first = b.String()
		} else if b.String() != first {
			t.Fatalf("report changed:\n%s\nthen:\n%s", first, b.String())
		}
	}
	for _, line := range []string{
		"chains: 2 of 4 action step(s) chained",
		"  a                            message  first step after the start\n  b                            chained\n  pause                        wait     a wait: its timer's message goes on\n  c                            message  after a wait\n  d                            chained\n",
		"without chains: 5 message(s) handled, 6 read(s), 15.0 SQS requests, 5.00 Lambda invocations",
		"lambdasaga without chains ",
		"per 1M action steps",
	} {
		if !strings.Contains(first, line) {
			t.Errorf("report lacks %q:\n%s", line, first)
		}
	}
	s, err := cost.Walk(plan, cost.Params{ChainSteps: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	s.Report(&b, "w", 1e6)
	if !strings.Contains(b.String(), "chains: off") || strings.Contains(b.String(), "without chains") {
		t.Errorf("without chaining, the report has no second price:\n%s", b.String())
	}
}
