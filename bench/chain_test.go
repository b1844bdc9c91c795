package bench_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// chainLen is the number of action steps of the saga the chain
// measurements run (sagatest.LinearSaga: action steps only; their
// compensations are declared and never run).
const chainLen = 10

// warmUp is how many sagas of each mode TestChainStepLatency runs before
// it measures.
const warmUp = 3

// The three modes TestChainStepLatency alternates.
const (
	modeToday   = iota // ChainSteps -1: every step its own message
	modeChained        // the default: the steps after the first chain
	modeFloor          // one conditional PutItem per step, no engine
	modes
)

var modeNames = [modes]string{"today (ChainSteps -1)", "chained (default)", "floor (one put a step)"}

// TestChainStepLatency runs a 10-step linear saga of no-op actions on the
// emulators, one saga at a time, through engine.RunWorker with one worker,
// in three modes alternating saga by saga within one run: today's path
// (ChainSteps -1: receive, consistent get, conditional put, send, delete
// for every step), chained (the default: the start's message runs all ten
// steps, one conditional put each) and the floor (ten conditional
// PutItems of a small item, no engine). Then sagas per second with 1, 2
// and 4 workers, today's path and chained.
//
// A step's own time runs from the write before it (for the first step,
// from the call to Start) to its own write, as the coordinator's step
// events tell; a saga's per-step time is its start to its last write,
// over its steps. Every request the mode's clients make is counted by API
// while a saga runs, and until the worker has deleted every message it
// received.
//
// It asserts what chains promise: a saga makes at most 2 SendMessage
// calls and at most 1 GetItem of its item; and chained steps are at least
// 3 times as fast as today's: the median over rounds of each round's ratio
// of the steps' median times. Every figure is logged as a table row
// (bench/README.md, "Chained steps").
//
// Sizes: BENCH_CHAIN_ROUNDS rounds (5, at least 3) of BENCH_CHAIN_SAGAS
// sagas per mode (3), and BENCH_CHAIN_THROUGHPUT_SAGAS sagas per
// throughput run (4): a few seconds in CI (make unit); make bench runs it
// larger, for bench/README.md.
func TestChainStepLatency(t *testing.T) {
	today, chained := awstest.New(t), awstest.New(t)
	rounds := max(3, envInt("BENCH_CHAIN_ROUNDS", 5))
	perRound := envInt("BENCH_CHAIN_SAGAS", 3)
	throughputSagas := envInt("BENCH_CHAIN_THROUGHPUT_SAGAS", 4)
	plan, err := saga.Compile("linear.yaml", []byte(sagatest.LinearSaga(chainLen)), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry()
	reg.MustRegister("work", func(context.Context, saga.Call) (any, error) { return nil, nil })
	reg.MustRegister("undo", func(context.Context, saga.Call) (any, error) { return nil, nil })
	tr := &tracker{runs: map[string]*sagaRun{}}
	deps := &rigDeps{reg: reg, tr: tr, log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	// Registered first, run last: every rig's cleanup stops its workers,
	// then this waits for all of them at once (each ends within its long
	// poll, a second).
	t.Cleanup(deps.workers.Wait)
	rigs := [2]*engineRig{
		modeToday:   newEngineRig(t, today, chainStepsOf(modeToday), deps),
		modeChained: newEngineRig(t, chained, chainStepsOf(modeChained), deps),
	}
	floor := newFloorRig(today)
	for _, r := range rigs {
		r.grow(1)
	}

	// Latency and requests, one saga at a time. The first sagas of each
	// mode warm up and are not counted: the definition's write and the
	// connections come with the first, and at CI size, without more, the
	// first round's ratio was the run's lowest in five runs of five.
	var res [modes]modeResult
	for m := range modes {
		res[m].sagasByRound = make([][]time.Duration, rounds)
		res[m].stepsByRound = make([][]time.Duration, rounds)
	}
	run := func(m int, id string) sagaSample {
		if m == modeFloor {
			return floor.runOne(t, id)
		}
		return rigs[m].runOne(t, tr, plan, id)
	}
	for i := range warmUp {
		for m := range modes {
			run(m, fmt.Sprintf("warm-%d-%d", m, i))
		}
	}
	for r := range rounds {
		for i := range perRound {
			for m := range modes {
				id := fmt.Sprintf("lat-%d-%d-%d", m, r, i)
				s := run(m, id)
				res[m].add(r, s)
				checkSaga(t, m, id, s)
			}
		}
	}

	t.Logf("%d rounds of %d sagas a mode, alternating saga by saga; times p50 / p99", rounds, perRound)
	row(t, "| mode | sagas | a step's own time | first step (from the call to Start) | later steps | a saga's start to end, over its steps |")
	for m := range modes {
		r := &res[m]
		row(t, fmt.Sprintf("| %s | %d | %s / %s | %s / %s | %s / %s | %s / %s |", modeNames[m], len(r.perSaga),
			ms(pct(r.steps, 50)), ms(pct(r.steps, 99)), ms(pct(r.first, 50)), ms(pct(r.first, 99)), ms(pct(r.later, 50)), ms(pct(r.later, 99)),
			ms(pct(r.perSaga, 50)), ms(pct(r.perSaga, 99))))
	}
	row(t, "| requests per step | GetItem (its item) | GetItem (other) | PutItem | UpdateItem | Query | SendMessage | SendMessageBatch | ReceiveMessage (with messages) | DeleteMessage(Batch) | other | total | ReceiveMessage (empty: idle long polls) |")
	for m := range modes {
		row(t, res[m].reqs.row(modeNames[m], len(res[m].perSaga)*chainLen))
	}
	row(t, fmt.Sprintf("| messages delivered again, SDK retries | today %d, %d | chained %d, %d | floor %d, %d |",
		res[modeToday].reqs.again, res[modeToday].reqs.retries(), res[modeChained].reqs.again, res[modeChained].reqs.retries(),
		res[modeFloor].reqs.again, res[modeFloor].reqs.retries()))
	// Where a chained step's time goes beyond the floor's: in its PutItem
	// (a larger item, with index keys), or around it (the engine).
	row(t, fmt.Sprintf("| PutItem, a call's time p50 / p99 | today %s / %s | chained %s / %s | floor %s / %s |",
		ms(pct(res[modeToday].reqs.puts, 50)), ms(pct(res[modeToday].reqs.puts, 99)),
		ms(pct(res[modeChained].reqs.puts, 50)), ms(pct(res[modeChained].reqs.puts, 99)),
		ms(pct(res[modeFloor].reqs.puts, 50)), ms(pct(res[modeFloor].reqs.puts, 99))))

	// Ratios within the run, of medians: each round's, their median, and
	// over all the run's sagas; of the steps' own timings, and of whole
	// sagas (start to end, over the steps).
	ratioRow := func(name string, a, b *modeResult) (string, float64) {
		var bySteps, bySagas []float64
		for r := range rounds {
			bySteps = append(bySteps, ratio(pct(a.stepsByRound[r], 50), pct(b.stepsByRound[r], 50)))
			bySagas = append(bySagas, ratio(pct(a.sagasByRound[r], 50), pct(b.sagasByRound[r], 50)))
		}
		m := medianOf(bySteps)
		return fmt.Sprintf("| %s | %.2f (rounds: %s); all: %.2f | %.2f (rounds: %s); all: %.2f |", name,
			m, ratios(bySteps), ratio(pct(a.steps, 50), pct(b.steps, 50)),
			medianOf(bySagas), ratios(bySagas), ratio(pct(a.perSaga, 50), pct(b.perSaga, 50))), m
	}
	todayRow, todayOverChained := ratioRow("today / chained", &res[modeToday], &res[modeChained])
	floorRow, _ := ratioRow("chained / floor", &res[modeChained], &res[modeFloor])
	row(t, "| ratio of medians | steps' own times: median of rounds (rounds); all | sagas' start to end: median of rounds (rounds); all |")
	row(t, todayRow)
	row(t, floorRow)
	// The goal holds times, which are measured, not pinned: it is asserted
	// only at the size make bench runs (BENCH_CHAIN_SAGAS set, no race
	// detector), never at the CI size, where a few sagas on a shared
	// machine would make the test flaky rather than tell anything.
	if os.Getenv("BENCH_CHAIN_SAGAS") != "" && !raceEnabled && todayOverChained < 3 {
		t.Errorf("chained steps are %.2f times as fast as today's (the median over rounds of the ratio of the steps' median timings): want at least 3", todayOverChained)
	}

	// Sagas per second: n sagas started at once, today's path and chained
	// alternating at each worker count, each run with queues of its own
	// (on its mode's table) and its workers stopped after it.
	backends := [2]*awstest.Backend{modeToday: today, modeChained: chained}
	row(t, "| workers | sagas | today's path | chained | chained / today | a saga's start to end over its steps, p50 / p99 | requests a step | messages delivered again, SDK retries |")
	for _, w := range []int{1, 2, 4} {
		var rate [2]float64
		var lat [2][]time.Duration
		var reqs [2]reqCount
		for _, m := range []int{modeToday, modeChained} {
			rig := newEngineRig(t, freshQueues(t, backends[m], fmt.Sprintf("tput-%d-%d-", m, w)), chainStepsOf(m), deps)
			rig.grow(w)
			var took time.Duration
			took, lat[m], reqs[m] = rig.runMany(t, tr, plan, fmt.Sprintf("tput-%d-%d", m, w), throughputSagas)
			rig.cancel() // its workers end within their long poll; the test's cleanup waits for them
			rate[m] = float64(throughputSagas) / took.Seconds()
		}
		steps := float64(throughputSagas * chainLen)
		row(t, fmt.Sprintf("| %d | %d x %d steps | %.1f sagas/s | %.1f sagas/s | %.2f | today %s / %s, chained %s / %s | today %.2f, chained %.2f | today %d, %d; chained %d, %d |",
			w, throughputSagas, chainLen, rate[modeToday], rate[modeChained], rate[modeChained]/rate[modeToday],
			ms(pct(lat[modeToday], 50)), ms(pct(lat[modeToday], 99)), ms(pct(lat[modeChained], 50)), ms(pct(lat[modeChained], 99)),
			float64(reqs[modeToday].total())/steps, float64(reqs[modeChained].total())/steps,
			reqs[modeToday].again, reqs[modeToday].retries(), reqs[modeChained].again, reqs[modeChained].retries()))
	}
}

// row logs a table row, and appends it to BENCH_REPORT's file when set.
func row(t *testing.T, line string) {
	t.Helper()
	t.Log(line)
	report(t, line)
}

// freshQueues returns b with queues of its own, named with prefix.
func freshQueues(t *testing.T, b *awstest.Backend, prefix string) *awstest.Backend {
	t.Helper()
	urls, err := sqsqueue.CreateQueues(context.Background(), b.SQS, sqsqueue.QueueSpec{Prefix: b.Table + "-" + prefix, MaxReceiveCount: 3, Visibility: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fresh := *b
	fresh.URLs = urls
	return &fresh
}

// chainStepsOf is CoordinatorConfig.ChainSteps for an engine mode.
func chainStepsOf(m int) int {
	if m == modeToday {
		return -1 // no chains: every step its own message
	}
	return 0 // the default
}

// checkSaga asserts what chains promise of one saga (the issue's "done
// when") and that each mode is the one it claims to be.
func checkSaga(t *testing.T, m int, id string, s sagaSample) {
	t.Helper()
	switch m {
	case modeChained:
		if sends := s.reqs.send + s.reqs.sendBatch; sends > 2 {
			t.Errorf("chained saga %s: %d SendMessage(Batch) calls, want at most 2 (%s)", id, sends, s.reqs)
		}
		if s.reqs.getItem > 1 {
			t.Errorf("chained saga %s: %d GetItem calls of its item, want at most 1 (%s)", id, s.reqs.getItem, s.reqs)
		}
	case modeToday:
		if s.reqs.received != chainLen {
			t.Errorf("saga %s on today's path: %d messages received, want one a step, %d (%s)", id, s.reqs.received, chainLen, s.reqs)
		}
	case modeFloor:
		if s.reqs.put != chainLen || s.reqs.total() != chainLen {
			t.Errorf("floor %s: %s, want %d PutItem calls and nothing else", id, s.reqs, chainLen)
		}
	}
}

// sagaSample is one saga's measurements.
type sagaSample struct {
	perStep time.Duration   // start to the last step's write, over chainLen
	steps   []time.Duration // each step's own time
	reqs    reqCount
}

// modeResult is what one mode measured over the run.
type modeResult struct {
	perSaga      []time.Duration   // each saga's start to end, over its steps
	steps        []time.Duration   // each step's own time
	first, later []time.Duration   // steps split: the first of each saga (it includes the start), the others
	sagasByRound [][]time.Duration // perSaga by round
	stepsByRound [][]time.Duration // steps by round
	reqs         reqCount
}

func (r *modeResult) add(round int, s sagaSample) {
	r.perSaga = append(r.perSaga, s.perStep)
	r.steps = append(r.steps, s.steps...)
	r.first = append(r.first, s.steps[0])
	r.later = append(r.later, s.steps[1:]...)
	r.sagasByRound[round] = append(r.sagasByRound[round], s.perStep)
	r.stepsByRound[round] = append(r.stepsByRound[round], s.steps...)
	r.reqs.add(s.reqs)
}

// reqCount is what one saga (or several) asked of DynamoDB and SQS.
type reqCount struct {
	getItem, getOther  int // GetItem of the saga's own item; of any other
	put, update, query int
	send, sendBatch    int
	received           int // messages received (not calls)
	again              int // of them, received before (ApproximateReceiveCount over 1)
	attempts           int // HTTP attempts of every call, the SDK's retries included
	receive            int // ReceiveMessage calls that returned messages
	receiveEmpty       int // ReceiveMessage calls that returned none: idle long polls
	del                int // DeleteMessage and DeleteMessageBatch calls
	other              int
	puts               []time.Duration // each PutItem call's time
}

func (c reqCount) total() int {
	return c.getItem + c.getOther + c.put + c.update + c.query + c.send + c.sendBatch + c.receive + c.del + c.other
}

func (c *reqCount) add(o reqCount) {
	c.getItem += o.getItem
	c.getOther += o.getOther
	c.put += o.put
	c.update += o.update
	c.query += o.query
	c.send += o.send
	c.sendBatch += o.sendBatch
	c.received += o.received
	c.again += o.again
	c.attempts += o.attempts
	c.receive += o.receive
	c.receiveEmpty += o.receiveEmpty
	c.del += o.del
	c.other += o.other
	c.puts = append(c.puts, o.puts...)
}

func (c reqCount) String() string {
	return fmt.Sprintf("GetItem %d (+%d other), PutItem %d, UpdateItem %d, Query %d, SendMessage %d, SendMessageBatch %d, ReceiveMessage %d (%d messages, %d of them again; %d empty), Delete %d, other %d; %d retries",
		c.getItem, c.getOther, c.put, c.update, c.query, c.send, c.sendBatch, c.receive, c.received, c.again, c.receiveEmpty, c.del, c.other, c.retries())
}

// retries is how many HTTP attempts the SDK made beyond one a call.
func (c reqCount) retries() int { return c.attempts - c.total() - c.receiveEmpty }

// row is the table row of c per step, over steps steps.
func (c reqCount) row(name string, steps int) string {
	f := func(n int) string { return strconv.FormatFloat(float64(n)/float64(steps), 'f', 2, 64) }
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", name,
		f(c.getItem), f(c.getOther), f(c.put), f(c.update), f(c.query), f(c.send), f(c.sendBatch), f(c.receive), f(c.del), f(c.other), f(c.total()), f(c.receiveEmpty))
}

// apiCounter counts the requests of the SDK clients it is registered on,
// by operation: GetItem by partition key, ReceiveMessage by whether it
// returned messages, and the messages received and deletes made (so that
// a saga's window can close once every message received is deleted).
type apiCounter struct {
	mu                sync.Mutex
	calls             map[string]int
	received, deleted int
	again             int             // messages received with ApproximateReceiveCount over 1
	attempts          int             // HTTP attempts: a call the SDK retries makes more than one
	puts              []time.Duration // each PutItem call's time
}

func newAPICounter() *apiCounter { return &apiCounter{calls: map[string]int{}} }

func (c *apiCounter) register(stack *middleware.Stack) error {
	// After the SDK's retry middleware: once per attempt, counted as it
	// ends, as calls are (a long poll spans windows).
	if err := stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("bench/apiCounterAttempts",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			c.mu.Lock()
			c.attempts++
			c.mu.Unlock()
			return out, md, err
		}), middleware.After); err != nil {
		return err
	}
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("bench/apiCounter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			began := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			took := time.Since(began)
			op := awsmiddleware.GetOperationName(ctx)
			key, msgs, again, dels := op, 0, 0, 0
			switch op {
			case "GetItem":
				if p, ok := in.Parameters.(*dynamodb.GetItemInput); ok {
					if pk, ok := p.Key["pk"].(*types.AttributeValueMemberS); ok {
						key = "GetItem " + pk.Value
					}
				}
			case "ReceiveMessage":
				if r, ok := out.Result.(*sqs.ReceiveMessageOutput); ok {
					msgs = len(r.Messages)
					for _, m := range r.Messages {
						if n, _ := strconv.Atoi(m.Attributes["ApproximateReceiveCount"]); n > 1 {
							again++
						}
					}
				}
				if msgs == 0 {
					key = "ReceiveMessage empty"
				}
			case "DeleteMessage":
				dels = 1
			case "DeleteMessageBatch":
				if p, ok := in.Parameters.(*sqs.DeleteMessageBatchInput); ok {
					dels = len(p.Entries)
				}
			}
			c.mu.Lock()
			if op == "PutItem" {
				c.puts = append(c.puts, took)
			}
			c.calls[key]++
			c.received += msgs
			c.again += again
			c.deleted += dels
			c.mu.Unlock()
			return out, md, err
		}), middleware.After)
}

// counted is an apiCounter's counts at one time.
type counted struct {
	calls                     map[string]int
	received, again, attempts int
	puts                      int // PutItem calls timed
}

func (c *apiCounter) snapshot() counted {
	c.mu.Lock()
	defer c.mu.Unlock()
	return counted{calls: maps.Clone(c.calls), received: c.received, again: c.again, attempts: c.attempts, puts: len(c.puts)}
}

// settled reports whether every message received has been deleted.
func (c *apiCounter) settled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.received == c.deleted
}

// since is the requests made between two snapshots, the saga's own GetItems
// told from the others by its key.
func (c *apiCounter) since(before, after counted, pk string) reqCount {
	c.mu.Lock()
	out := reqCount{received: after.received - before.received, again: after.again - before.again, attempts: after.attempts - before.attempts,
		puts: slices.Clone(c.puts[before.puts:after.puts])}
	c.mu.Unlock()
	for key, n := range after.calls {
		n -= before.calls[key]
		switch {
		case n == 0:
		case key == "GetItem "+pk:
			out.getItem += n
		case strings.HasPrefix(key, "GetItem"):
			out.getOther += n
		case key == "PutItem":
			out.put += n
		case key == "UpdateItem":
			out.update += n
		case key == "Query":
			out.query += n
		case key == "SendMessage":
			out.send += n
		case key == "SendMessageBatch":
			out.sendBatch += n
		case key == "ReceiveMessage":
			out.receive += n
		case key == "ReceiveMessage empty":
			out.receiveEmpty += n
		case key == "DeleteMessage", key == "DeleteMessageBatch":
			out.del += n
		default:
			out.other += n
		}
	}
	return out
}

// tracker hears the coordinators' step events and times each saga's steps.
type tracker struct {
	mu   sync.Mutex
	runs map[string]*sagaRun
}

type sagaRun struct {
	began  time.Time
	wrote  [chainLen]time.Time // when each step's completion was written
	status durable.Status      // once final
	done   chan struct{}
}

// expect registers a saga about to start now.
func (tr *tracker) expect(id string) *sagaRun {
	r := &sagaRun{done: make(chan struct{})}
	tr.mu.Lock()
	tr.runs[id] = r
	r.began = time.Now()
	tr.mu.Unlock()
	return r
}

func (tr *tracker) onStep(ev engine.StepEvent) {
	now := time.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	r := tr.runs[ev.SagaID]
	if r == nil || r.status != "" {
		return
	}
	if ev.Outcome == saga.OutcomeCompleted && !ev.Compensation {
		if k, err := strconv.Atoi(strings.TrimPrefix(ev.Step, "s")); err == nil && k >= 0 && k < chainLen {
			r.wrote[k] = now
		}
	}
	if ev.Status.Final() {
		r.status = ev.Status
		close(r.done)
	}
}

// sample is r's timings, once done.
func (tr *tracker) sample(t *testing.T, id string, r *sagaRun) sagaSample {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if r.status != durable.StatusSucceeded {
		t.Fatalf("saga %s ended %s", id, r.status)
	}
	s := sagaSample{perStep: r.wrote[chainLen-1].Sub(r.began) / chainLen}
	prev := r.began
	for k, at := range r.wrote {
		if at.IsZero() {
			t.Fatalf("saga %s succeeded with no completion heard for s%d", id, k)
		}
		s.steps = append(s.steps, at.Sub(prev))
		prev = at
	}
	return s
}

// engineRig is a coordinator with workers on the advance queue of a table
// and queues of its own, its requests counted.
type engineRig struct {
	coord   *engine.Coordinator
	queue   *sqsqueue.Queue
	ctr     *apiCounter
	deps    *rigDeps
	ctx     context.Context
	cancel  context.CancelFunc // stops the workers
	workers int
}

// rigDeps is what the rigs of a test share.
type rigDeps struct {
	reg     *engine.Registry
	tr      *tracker
	log     *slog.Logger
	workers sync.WaitGroup // every rig's workers
}

// newEngineRig returns a rig with no workers yet; the test's cleanup stops
// them.
func newEngineRig(t *testing.T, b *awstest.Backend, chainSteps int, deps *rigDeps) *engineRig {
	t.Helper()
	r := &engineRig{ctr: newAPICounter(), deps: deps}
	store, err := dynamo.New(dynamo.Config{Client: awslocal.DynamoDB(b.DynamoDBEndpoint, r.ctr.register), Table: b.Table})
	if err != nil {
		t.Fatal(err)
	}
	if r.queue, err = sqsqueue.New(sqsqueue.Config{Client: awslocal.SQS(b.SQSEndpoint, r.ctr.register), URLs: b.URLs}); err != nil {
		t.Fatal(err)
	}
	if r.coord, err = engine.NewCoordinator(engine.CoordinatorConfig{Store: store, Queue: r.queue, Actions: deps.reg, ChainSteps: chainSteps, OnStep: deps.tr.onStep, Logger: deps.log}); err != nil {
		t.Fatal(err)
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	t.Cleanup(r.cancel)
	return r
}

// grow starts workers until there are n.
func (r *engineRig) grow(n int) {
	for ; r.workers < n; r.workers++ {
		r.deps.workers.Go(func() {
			_ = engine.RunWorker(r.ctx, engine.WorkerConfig{Coordinator: r.coord, Receiver: r.queue, Queue: durable.QueueAdvance, Visibility: 30 * time.Second, Logger: r.deps.log})
		})
	}
}

// settle waits until every message the workers received is deleted: a
// saga's last delete follows its last write.
func (r *engineRig) settle(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !r.ctr.settled(); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatal("the workers did not delete every message they received within 30s")
		}
	}
}

// runOne starts a saga and waits for its end and for the worker to be done
// with it; the requests counted meanwhile are the saga's.
func (r *engineRig) runOne(t *testing.T, tr *tracker, plan *saga.Plan, id string) sagaSample {
	t.Helper()
	before := r.ctr.snapshot()
	run := tr.expect(id)
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: id}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-run.done:
	case <-time.After(time.Minute):
		t.Fatalf("saga %s did not end within a minute", id)
	}
	r.settle(t)
	s := tr.sample(t, id, run)
	s.reqs = r.ctr.since(before, r.ctr.snapshot(), "SAGA#"+id)
	return s
}

// runMany starts n sagas at once and returns the time from the first
// start to the last saga's last write, and each saga's start-to-end time
// over its steps.
func (r *engineRig) runMany(t *testing.T, tr *tracker, plan *saga.Plan, prefix string, n int) (time.Duration, []time.Duration, reqCount) {
	t.Helper()
	runs := make([]*sagaRun, n)
	before := r.ctr.snapshot()
	began := time.Now()
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		runs[i] = tr.expect(id)
		if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: id}); err != nil {
			t.Fatal(err)
		}
	}
	var last time.Time
	var lat []time.Duration
	for i, run := range runs {
		select {
		case <-run.done:
		case <-time.After(5 * time.Minute):
			t.Fatalf("saga %s-%d did not end within 5 minutes", prefix, i)
		}
		s := tr.sample(t, fmt.Sprintf("%s-%d", prefix, i), run)
		end := run.wrote[chainLen-1]
		if end.After(last) {
			last = end
		}
		lat = append(lat, s.perStep)
	}
	r.settle(t)
	return last.Sub(began), lat, r.ctr.since(before, r.ctr.snapshot(), "")
}

// floorRig does per step the one request a chained step cannot do
// without: a PutItem of a small item, conditional on its version.
type floorRig struct {
	client *dynamodb.Client
	table  string
	ctr    *apiCounter
	state  []byte
}

func newFloorRig(b *awstest.Backend) *floorRig {
	f := &floorRig{ctr: newAPICounter(), table: b.Table, state: make([]byte, 400)}
	f.client = awslocal.DynamoDB(b.DynamoDBEndpoint, f.ctr.register)
	return f
}

func (f *floorRig) runOne(t *testing.T, id string) sagaSample {
	t.Helper()
	ctx := context.Background()
	before := f.ctr.snapshot()
	began := time.Now()
	prev := began
	var s sagaSample
	for v := 1; v <= chainLen; v++ {
		in := &dynamodb.PutItemInput{TableName: &f.table, Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "FLOOR#" + id}, "sk": &types.AttributeValueMemberS{Value: "STATE"},
			"v": &types.AttributeValueMemberN{Value: strconv.Itoa(v)}, "state": &types.AttributeValueMemberB{Value: f.state},
		}}
		if v == 1 {
			in.ConditionExpression = aws.String("attribute_not_exists(v)")
		} else {
			in.ConditionExpression = aws.String("v = :v")
			in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.Itoa(v - 1)}}
		}
		if _, err := f.client.PutItem(ctx, in); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		s.steps = append(s.steps, now.Sub(prev))
		prev = now
	}
	s.perStep = prev.Sub(began) / chainLen
	s.reqs = f.ctr.since(before, f.ctr.snapshot(), "FLOOR#"+id)
	return s
}

// pct is the p-th percentile of ds (nearest rank, from a sorted copy).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[min(len(s)-1, len(s)*p/100)]
}

func medianOf(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ratio(a, b time.Duration) float64 { return a.Seconds() / b.Seconds() }

func ratios(xs []float64) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(out, ", ")
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds()*1000, 'f', 2, 64) + " ms"
}
