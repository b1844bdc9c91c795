// Package cost estimates what a saga costs on AWS with lambdasaga, next to
// what the same saga would cost on Step Functions Standard, Step Functions
// Express and Lambda durable functions. The saga's path is walked with
// Advance (actions succeeding unless told otherwise), every transition's
// status is kept, and each request is priced at the list prices in
// ListPrices, counting DynamoDB's units as DynamoDB bills them. Each action
// step is found chained or not by the engine's rule (docs/PROTOCOL.md,
// "Chains"): a chained step is its write alone, with no message, read or
// invocation of its own; the path is priced without chains too.
package cost

import (
	"fmt"
	"math"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Prices are AWS list prices, us-east-1, on-demand, without free tiers:
// the one table to update when prices change. Each field names the page it
// comes from; bench/README.md ("Cost model") lists the same pages.
type Prices struct {
	// https://aws.amazon.com/lambda/pricing/: $0.20 per million requests.
	LambdaPerMillionRequests float64
	// The same page: $0.0000133334 per GB-second on Arm (the first duration tier).
	LambdaArmPerGBSecond float64
	// https://aws.amazon.com/sqs/pricing/: standard queues, $0.40 per
	// million requests, each 64 KB chunk of a payload billed as a request.
	SQSPerMillionRequests float64
	// https://aws.amazon.com/dynamodb/pricing/on-demand/: $0.625 per million
	// write request units.
	DynamoPerMillionWRU float64
	// The same page: $0.125 per million read request units.
	DynamoPerMillionRRU float64
	// https://aws.amazon.com/step-functions/pricing/: Standard workflows,
	// $25 per million state transitions, retries included.
	StepFunctionsPerMillion float64
	// The same page: Express workflows, $1.00 per million requests.
	StepFunctionsExpressPerMillion float64
	// The same page: Express workflows, $0.06 per GB-hour of duration for
	// the first 1,000 GB-hours (0.06/3600 per GB-second); duration is
	// rounded up to 100 ms and memory billed in 64 MB chunks
	// (ExpressMemoryMB).
	StepFunctionsExpressPerGBSecond float64
	// https://aws.amazon.com/lambda/pricing/ (Lambda durable functions):
	// $8.00 per million durable operations. That page could not be read
	// here; the figure is its transcription in api-evangelist/aws-lambda
	// (plans/aws-lambda-plans-pricing.yml, read 2026-09-20). Durable
	// functions also bill the data they write and retain; no price for those
	// was found, so they are not counted.
	DurablePerMillionOperations float64
	// https://docs.temporal.io/cloud/pricing, "Pay-As-You-Go": Temporal
	// Cloud bills $50 per million Actions for the first 5 million a month
	// (the Developer plan at every volume), less with volume on the
	// Business plan and above, down to TemporalCloudPerMillionActionsAtVolume;
	// its plan (10% of usage, or more), its storage and the workers are
	// billed besides. What counts as an Action is on
	// https://docs.temporal.io/cloud/actions (a Workflow started, an
	// Activity started or retried, a Timer started, a Signal sent). Both
	// read 2026-12-02. sagactl cost does not price Temporal Cloud:
	// docs/COST.md ("Chained steps") compares it per million action steps.
	TemporalCloudPerMillionActions float64
	// The same page: $25 per million Actions from 100 to 200 million a
	// month, the lowest Pay-As-You-Go price it lists.
	TemporalCloudPerMillionActionsAtVolume float64
	// https://aws.amazon.com/s3/pricing/, S3 Standard, us-east-1: $0.005
	// per 1,000 PUT requests, $0.0004 per 1,000 GET requests, $0.023 per
	// GB-month for the first 50 TB. That page renders its request prices
	// by script; docs/COST.md ("Prices") names the two readings of it the
	// figures agree with.
	S3PerThousandPuts, S3PerThousandGets, S3PerGBMonth float64
}

// ListPrices is the table, checked in November 2026.
var ListPrices = Prices{
	LambdaPerMillionRequests:        0.20,
	LambdaArmPerGBSecond:            0.0000133334,
	SQSPerMillionRequests:           0.40,
	DynamoPerMillionWRU:             0.625,
	DynamoPerMillionRRU:             0.125,
	StepFunctionsPerMillion:         25.0,
	StepFunctionsExpressPerMillion:  1.00,
	StepFunctionsExpressPerGBSecond: 0.06 / 3600,
	DurablePerMillionOperations:     8.00,

	TemporalCloudPerMillionActions:         50.0,
	TemporalCloudPerMillionActionsAtVolume: 25.0,

	S3PerThousandPuts: 0.005,
	S3PerThousandGets: 0.0004,
	S3PerGBMonth:      0.023,
}

// ExpressMemoryMB is the memory an Express workflow of a saga is billed
// for: 50 MB plus the definition and the execution data, billed in 64 MB
// chunks (the Step Functions pricing page's examples 3 and 4), so 64 MB for
// any saga whose state and definition take under 14 MB.
const ExpressMemoryMB = 64

// ExpressMaxDuration is the longest an Express workflow runs.
const ExpressMaxDuration = 5 * time.Minute

// Params describe the deployment and the measurements the estimate uses.
// Zero means the default.
type Params struct {
	MemoryMB     int           // the functions' memory (template: 256)
	Duration     time.Duration // billed duration of one action step (an invocation's without chains), measured; default 10 ms
	StateBytes   int           // the saga's encoded state, measured (its largest); default 600
	MessageBytes int           // one message; default 110
	// BatchSize is how many messages one invocation handles on average
	// (1 when traffic is light; up to the event source's batch size).
	BatchSize float64
	// SagaIDBytes is the length of the saga ids, which the item holds
	// three times (its key, the index's sort key); default 36, a UUID.
	SagaIDBytes int
	Input       map[string]any // the input whose path is costed; nil: zero values
	// SignalsFirst: each await's signal comes before the saga reaches the
	// await, so it is kept (a write of the whole item, the status kept) and
	// taken by the transition that reaches the await, which then does not
	// wait. False: the await waits, and the signal wakes it.
	SignalsFirst bool
	// Signals gives the payload each signal, by name, is delivered with
	// (plain values, as saga.CheckValue takes them): a payload can choose
	// the path (an assert or a switch on the await's out). A signal not
	// named is delivered with none (null).
	Signals map[string]any
	// Transient names the calls that fail with an error the step may retry
	// (nil: none); the step's retry policy decides whether another attempt
	// follows. A call the walk's fail function names fails for good instead.
	Transient func(saga.Call) bool
	// ChainSteps bounds the steps a message runs after its own, as
	// engine.CoordinatorConfig.ChainSteps does: 0 is the engine's default
	// (engine.DefaultChainSteps); negative prices every action step as a
	// message of its own, as without chains.
	ChainSteps int
	// ChainTime is a chain's time budget, as engine.CoordinatorConfig's
	// (0: engine.DefaultChainTime). A chain shares it with the records
	// waiting behind it in its batch: the walk gives each chain
	// ChainTime/BatchSize, what the first record of a full batch gets.
	ChainTime time.Duration
	// FunctionTimeout is the functions' timeout (0: 30 s, the template's):
	// a step with a timeout chains only while the invocation has that
	// timeout and 3 s left.
	FunctionTimeout time.Duration
	// StartQueue: the saga is started, and its signals and callbacks
	// delivered, by requests to the start queue (docs/START_QUEUE.md)
	// rather than by a client that writes the table itself. Each request
	// is one message more (a send, and its share of a receive and a
	// delete per batch), handled by the advance function (its share of an
	// invocation, and Duration of compute); the writes and reads the
	// request makes are those a client's start or delivery makes.
	StartQueue bool
	// LargeValues values of LargeValueBytes each (an input document, an
	// action's output) pass through the saga: made once, held in the state
	// to its end. Over OffloadBytes (0: engine.DefaultOffloadBytes) each is
	// an S3 object: a PUT when made, a GET at each step handled from its
	// message (a cold read, the worst case: a warm instance or a chain
	// reads none), a LIST (per 1,000) and a COPY when the saga ends (its
	// objects marked ended), ObjectDays of storage (0: 30, the
	// template's RetentionDays after the end; the saga's own run aside),
	// and a reference of about 40 bytes in the item. At or under it, each adds its bytes to the item, and so to
	// every write and read of it.
	LargeValues, LargeValueBytes, OffloadBytes, ObjectDays int
}

// check refuses figures no deployment has: negative or not finite.
func (p Params) check() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"MemoryMB", float64(p.MemoryMB)},
		{"Duration", float64(p.Duration)},
		{"StateBytes", float64(p.StateBytes)},
		{"MessageBytes", float64(p.MessageBytes)},
		{"BatchSize", p.BatchSize},
		{"SagaIDBytes", float64(p.SagaIDBytes)},
		{"ChainTime", float64(p.ChainTime)},
		{"FunctionTimeout", float64(p.FunctionTimeout)},
		{"LargeValues", float64(p.LargeValues)},
		{"LargeValueBytes", float64(p.LargeValueBytes)},
		{"OffloadBytes", float64(p.OffloadBytes)},
		{"ObjectDays", float64(p.ObjectDays)},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("cost.Params.%s: must be a finite number, zero (the default) or more", f.name)
		}
	}
	return nil
}

func (p Params) withDefaults() Params {
	if p.MemoryMB == 0 {
		p.MemoryMB = 256
	}
	if p.Duration == 0 {
		p.Duration = 10 * time.Millisecond
	}
	if p.StateBytes == 0 {
		p.StateBytes = 600
	}
	if p.MessageBytes == 0 {
		p.MessageBytes = 110
	}
	if p.BatchSize < 1 {
		p.BatchSize = 1
	}
	if p.SagaIDBytes == 0 {
		p.SagaIDBytes = 36
	}
	if p.ChainSteps == 0 {
		p.ChainSteps = engine.DefaultChainSteps
	}
	if p.ChainTime == 0 {
		p.ChainTime = engine.DefaultChainTime
	}
	if p.FunctionTimeout == 0 {
		p.FunctionTimeout = 30 * time.Second
	}
	if p.OffloadBytes == 0 {
		p.OffloadBytes = engine.DefaultOffloadBytes
	}
	if p.ObjectDays == 0 {
		p.ObjectDays = 30
	}
	return p
}

// Chaining reports whether the walk looks for chains (ChainSteps not
// negative).
func (p Params) Chaining() bool { return p.ChainSteps >= 0 }

// Saga counts the work of one saga on one path.
type Saga struct {
	Params Params // as walked, defaults filled in

	Path          []string // steps run, in order
	Compensations int      // compensations run once the saga fails; 0 when it succeeds
	Calls         int      // actions and compensations called, every attempt
	Retries       int      // attempts that failed and were retried
	// RetryWait is the backoff the retries wait out, in all.
	RetryWait time.Duration
	// Timers counts the wait steps' timers fired: each a message handled
	// (no action), a read, a write, and its by_due entry put and deleted.
	Timers int
	// TickedTimers counts those of Timers due more than a queue's delay
	// (15 minutes) after they were set: the every-minute tick reads the
	// saga to send the timer's message, one read more each.
	TickedTimers int
	// WaitTime is what the waits wait, in all.
	WaitTime time.Duration
	// Signals counts the signals delivered (each awaited by an await): the
	// sender's read and write, and the write sends the next step's message.
	Signals int
	// SignalsKept counts those of Signals kept first (Params.SignalsFirst):
	// their write keeps the status, and their await does not wait.
	SignalsKept int
	// Holds counts the times the saga was held (on_failure: hold) and an
	// operator compensated it, as the walk assumes: the operator's read
	// and write, which sends the first compensation's message.
	Holds int
	// Callbacks counts the callback steps' tokens completed, each after its
	// action returned: the completer's read and write, which sends the next
	// step's message.
	Callbacks int
	// QueueRequests counts the start queue's requests (Params.StartQueue):
	// the start, each signal and each callback's completion.
	QueueRequests int
	// Parked counts the awaits and callbacks that waited: each puts a
	// by_due entry and deletes it when woken (as a wait's timer does).
	Parked int
	// StaleTimers counts the parked awaits and callbacks whose timeout was
	// within 15 minutes: their timer is a delayed message, sent as they
	// park, that still comes after the delivery woke the saga, and is
	// received, read and dropped.
	StaleTimers int
	// ActionSteps counts the action steps run (actions, compensations and
	// findings out, every attempt): one per call, and one per call whose
	// input could not be built (its step fails in that pass). Each is a
	// message handled, or a step chained.
	ActionSteps int
	// ChainedSteps counts those of ActionSteps run in a chain: each its
	// conditional write alone, with no message, no read and no invocation
	// of its own (docs/PROTOCOL.md, "Chains"). Zero without chains.
	ChainedSteps int
	// Steps is each step run, in order (a fork's children's included):
	// each action step chained or not and why, and the waits, awaits and
	// forks, which never chain.
	Steps []StepRun
	// Children counts the child runs of forks started (branches,
	// iterations, child sagas); their transitions are in childWrites, not
	// Statuses. ForkCounts counts their ends counted in fork records (a
	// message, a read of the child and a write of under 1 KB each); Joins
	// the forks joined (a message, and a read of the parent and of each
	// child); Undos the children undone as a whole (the undo and end
	// messages, three reads).
	Children, ForkCounts, Joins, Undos int
	// LaunchReads counts the reads of the parent after a child's create,
	// for forks whose children await signals (one a child: the signals
	// kept for it meanwhile).
	LaunchReads int
	// Expires counts the items the walk that expires a finished tree
	// marks (each child run and fork record, once the root is succeeded or
	// compensated: an UpdateItem of ttl each); ExpireMessages its
	// messages and ExpireReads its reads (each message reads its saga,
	// its ancestors and its fork records; each child is read, for its
	// objects and its forks). A root without forks whose values are kept
	// as objects (Params.Offloaded) has one message, which reads it.
	Expires, ExpireMessages, ExpireReads int
	expireWRU                            float64
	childWrites                          []childWrite
	Transitions                          int // state writes, start included
	// Statuses is the saga's status after each transition, the start's first.
	Statuses []string
	// StatusChanges counts the transitions whose status differs from the
	// one before.
	StatusChanges  int
	SFNTransitions int // Step Functions state transitions for the same path
	DynamoWrites   int // PutItems: one per transition
	// ItemBytes is the largest saga item written, as DynamoDB sizes items
	// (attribute names plus values): StateBytes plus ItemOverheadBytes.
	ItemBytes int
	// ItemOverheadBytes is the item's keys and other attributes (itemBytes).
	ItemOverheadBytes int
	// IndexEntryBytes is the by_status entry's size: its keys, the table's
	// keys and the projected attributes.
	IndexEntryBytes int
	RRUPerRead      float64 // strongly consistent: 1 per 4 KB of item, rounded up
	// TableWRU is the write units billed on the table: for each write, 1
	// per KB of item, rounded up.
	TableWRU float64
	// IndexWRU is the write units billed on the by_status index, by the
	// Developer Guide's "Global secondary indexes: writes": the create puts
	// an entry (1 write), a transition that changes the status moves it
	// (its key holds the status: a delete and a put, 2 writes), and one that
	// keeps the status writes nothing, since the entry's key and projected
	// attributes do not change with it. Each write is 1 unit per KB of
	// entry, rounded up: 1 for any entry under 1 KB. The emulators do not
	// report these.
	IndexWRU float64
	// LambdaGBSeconds is ActionSteps times Duration times MemoryMB/1024: a
	// chained step's action runs in its carrier's invocation, billed as
	// long.
	LambdaGBSeconds float64
	// Priced is the requests and dollars with the chains the walk found
	// (without any when Params.ChainSteps is negative).
	Priced
	// Unchained prices the same path with every action step a message of
	// its own: as before chains, or with chaining turned off.
	Unchained       Priced
	CostStepFnsSaga float64 // USD per saga on Step Functions Standard, transitions only: SFNTransitions at list price
	// Comparisons price the same path on the other services.
	Comparisons []Comparison
}

// Priced is what one saga's requests cost, with chains or without.
type Priced struct {
	// Messages counts the messages handled: the action steps not chained,
	// the timers, the stale timers, the fork counts, joins, undos and
	// expiry.
	Messages      int
	DynamoReads   int     // consistent GetItems: one per message handled and per delivery, and the forks' and ticks' reads
	SQSRequests   float64 // billed requests: a send per message, a receive and a delete per batch
	LambdaInvokes float64 // Messages over BatchSize
	// ObjectPuts and ObjectGets are the S3 requests of the large values
	// kept as objects (Params.LargeValues); ObjectLists and ObjectCopies
	// those that mark them ended when the saga's tree ends (billed as
	// PUTs are).
	ObjectPuts, ObjectGets, ObjectLists, ObjectCopies int
	// CostBreakdownUSD is USD per saga by part: "lambda requests", "lambda
	// compute", "sqs", "dynamodb writes", "dynamodb reads".
	CostBreakdownUSD map[string]float64
	CostLambdaSaga   float64 // USD per saga with lambdasaga: the sum of CostBreakdownUSD, in Parts order
}

// StepRun is a step the walk ran: an action step (an action, a
// compensation or a finding out, one attempt), chained or handled from a
// message of its own, or a wait, an await or a fork.
type StepRun struct {
	Step string `json:"step"` // the step's id
	// Kind is "action", "compensation", "finding out", "wait", "await" or
	// "fork".
	Kind    string `json:"kind"`
	Attempt int    `json:"attempt"` // an action step's attempt, from 1; 0 for the others
	Child   bool   `json:"child"`   // a step of a fork's child run
	Chained bool   `json:"chained"` // run in the invocation of the step before it: its write alone
	// Why says why it is not chained (one of the Why constants, or what
	// a wait, an await or a fork does); "" when chained.
	Why string `json:"why"`
}

// Why an action step is not chained: the engine's rule (docs/PROTOCOL.md,
// "Chains"), checked in this order.
const (
	WhyOff          = "chaining off"               // Params.ChainSteps negative
	WhyCallbackStep = "callback step"              // its action starts work the saga then waits for
	WhyStart        = "first step after the start" // a chain starts from a message's action step only
	WhyWait         = "after a wait"               // the timer's message wrote the transition before
	WhySignal       = "after a signal"             // the signal's sender wrote it
	WhyCallback     = "after a callback"           // the callback's completer wrote it
	WhyJoin         = "after a join"               // the fork's join message wrote it
	WhyUndo         = "after an undo"              // a fork's undo of a child wrote it
	WhyOperator     = "after an operator's verb"   // a held saga's compensate wrote it
	WhyOutbox       = "outbox not one step message"
	WhyBackoff      = "retry backoff"      // the message is delayed
	WhyDelayed      = "delayed message"    // delayed, not a retry
	WhyCompensation = "first compensation" // the compensate queue, after the advance queue
	WhyQueue        = "another queue"
	WhyLimit        = "chain step limit" // Params.ChainSteps after the message's own
	WhyTime         = "chain time budget"
	WhyNotFresh     = "untimed step, invocation not fresh" // over saga.StartReserve into the invocation
	WhyTimeout      = "step timeout does not fit the invocation"
)

// childWrite is a transition of a child run: its status, and whether the
// child is listed (a child saga) or not (a branch, an iteration: no index
// entry).
type childWrite struct {
	status string
	listed bool
	first  bool
}

// childRun is a child run of the walk, kept for its parent's undo.
type childRun struct {
	plan   *saga.Plan
	st     *saga.State
	listed bool
}

// Parts are the keys of Saga.CostBreakdownUSD, in report order.
func Parts() []string {
	return []string{"lambda requests", "lambda compute", "sqs", "dynamodb writes", "dynamodb reads", "s3 requests", "s3 storage"}
}

// refBytes is what a reference to an object adds to the state: its
// encoding (a type byte, the size, the SHA-256) and the value's framing.
const refBytes = 40

// Offloaded reports whether the walk's large values are kept as objects.
func (p Params) Offloaded() bool { return p.LargeValues > 0 && p.LargeValueBytes > p.OffloadBytes }

// valueBytes is what the large values add to the state: their bytes
// inline, or a reference each.
func (p Params) valueBytes() int {
	if p.Offloaded() {
		return p.LargeValues * refBytes
	}
	return p.LargeValues * p.LargeValueBytes
}

// dryRunStart is the walk's fixed time; retries are not waited for.
var dryRunStart = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// walkSecret keys the walk's callback tokens (16 bytes or more).
var walkSecret = []byte("cost walk callbacks")

// maxCalls bounds a walk: a saga's action visits (saga.DefaultMaxVisits)
// with room for their compensations and retries, as saga.DryRun does.
const maxCalls = 3 * saga.DefaultMaxVisits

// Walk runs the saga with Advance (actions succeed with their input as
// output, except the calls fail names, which fail for good, and those
// p.Transient names; nil fail: none), keeps each transition's status, and
// counts what each piece of the path costs. A negative or non-finite figure
// in p is an error.
func Walk(plan *saga.Plan, p Params, fail func(saga.Call) bool) (*Saga, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	if inline := p.StateBytes + p.valueBytes(); !p.Offloaded() && p.LargeValues > 0 && inline > saga.MaxStateBytes {
		return nil, fmt.Errorf("%d values of %d bytes inline make a %d-byte state, over the limit of %d: no saga holds them inline (with an object store, they go by reference over OffloadBytes)",
			p.LargeValues, p.LargeValueBytes, inline, saga.MaxStateBytes)
	}
	in, err := plan.CheckInput(p.Input)
	if err != nil {
		return nil, err
	}
	s := &Saga{Params: p}
	onStep := func(rec saga.StepRecord) {
		if rec.Outcome == saga.OutcomeStarted || rec.Outcome == saga.OutcomeWaiting {
			return // counted when the step ends
		}
		// Step Functions bills each state entered, retries included; counted
		// conservatively (nothing for the start or the end, one state per
		// step, compensation or retry).
		s.SFNTransitions++
		switch {
		case rec.Outcome == saga.OutcomeRetrying:
			s.Retries++
			s.RetryWait += rec.Delay
		case rec.Compensation:
			s.Compensations++
		default:
			s.Path = append(s.Path, rec.Step)
		}
	}
	st := &saga.State{}
	if err := plan.Advance(st, saga.Event{Kind: saga.EventStart, Now: dryRunStart, SagaID: "cost", Input: in, OnStep: onStep, Secret: walkSecret}); err != nil {
		return nil, err
	}
	s.Statuses = append(s.Statuses, string(st.Status))
	w := &walker{s: s, fail: fail, onStep: onStep, now: dryRunStart, children: map[string]*childRun{}}
	if err := w.drive(plan, st, WhyStart, func(st *saga.State) { s.Statuses = append(s.Statuses, string(st.Status)) }); err != nil {
		return nil, err
	}
	if st.Status == durable.StatusSucceeded || st.Status == durable.StatusCompensated {
		w.expire(plan, st, 0)
	}
	s.count(plan.Name())
	return s, nil
}

// walker drives a walk: a saga and, one after the other, its forks'
// children.
type walker struct {
	s        *Saga
	fail     func(saga.Call) bool
	onStep   func(saga.StepRecord)
	now      time.Time
	calls    int
	children map[string]*childRun
	depth    int // 0 for the saga, 1 and more in its forks' children
}

// chain is where a run's chain stands before its next action step.
type chain struct {
	// after is why no chain goes on: the transition before was not a
	// message's or a chained action step's (a Why constant); "" when it
	// was.
	after string
	queue durable.QueueName // the carrier's queue
	steps int               // the steps chained after the carrier's own
}

// run records a step run.
func (w *walker) run(plan *saga.Plan, cur saga.Cursor, kind, why string, chained bool) {
	r := StepRun{Step: plan.StepID(cur.Step), Kind: kind, Child: w.depth > 0, Chained: chained, Why: why}
	if kind == "action" || kind == "compensation" || kind == "finding out" {
		r.Attempt = cur.Attempt
	}
	w.s.Steps = append(w.s.Steps, r)
}

// drive advances st until it is final, calling wrote after each of its
// transitions. after says why its first action step is not chained (the
// transition before it was a start, a join, an undo).
func (w *walker) drive(plan *saga.Plan, st *saga.State, after string, wrote func(*saga.State)) error {
	s, p, onStep := w.s, w.s.Params, w.onStep
	ch := chain{after: after}
	for {
		cur, pending := st.Pending()
		if !pending {
			return nil
		}
		if w.calls++; w.calls > maxCalls {
			return fmt.Errorf("cost of saga %s: the walk did not end within %d calls: a loop its answers never leave", plan.Name(), maxCalls)
		}
		if cur.Fork {
			if cur.Compensating {
				w.run(plan, cur, "fork", "a fork's undo: the child undoes its steps", false)
				ch = chain{after: WhyUndo}
			} else {
				w.run(plan, cur, "fork", "a fork: its children run on their own, then the join", false)
				ch = chain{after: WhyJoin}
			}
			if err := w.fork(plan, st, cur, wrote); err != nil {
				return err
			}
			continue
		}
		if cur.Held {
			// Held: an operator compensates it (the worst case the walk
			// prices: a retry would run the step again).
			s.Holds++
			if err := plan.Advance(st, saga.Event{Kind: saga.EventCompensate, Now: w.now, OnStep: onStep}); err != nil {
				return err
			}
			wrote(st)
			ch = chain{after: WhyOperator}
			continue
		}
		if cur.Wait && !p.delivers(plan, cur) {
			w.run(plan, cur, "wait", "a wait: its timer's message goes on", false)
			ch = chain{after: WhyWait}
			// A wait's timer: a message handled, a read and a write; no
			// action; for a long one, the tick's read of the saga too. (The
			// tick's queries are the deployment's fixed cost, in
			// bench/README.md.)
			s.Timers++
			if st.WakeAt().Sub(w.now) > maxQueueDelay {
				s.TickedTimers++
			}
			s.WaitTime += st.WakeAt().Sub(w.now)
			w.now = st.WakeAt()
			if err := plan.Advance(st, saga.Event{Kind: saga.EventTimer, Now: w.now, OnStep: onStep}); err != nil {
				return err
			}
			wrote(st)
			continue
		}
		if cur.Wait {
			// An await's signal or a callback's completion, at once: the
			// sender's read and write; its timer is never due. A signal
			// kept first is taken by the transition before, whose chain
			// goes on.
			kept, err := s.deliver(plan, st, w.now, onStep, wrote)
			if err != nil {
				return err
			}
			id, _ := plan.Awaits(cur)
			switch ls, _ := plan.Step(id); {
			case ls.Kind != lang.KindAwait:
				ch = chain{after: WhyCallback} // the callback step's action is its entry
			case kept:
				w.run(plan, cur, "await", "an await whose signal came first: taken by the step before", false)
			default:
				w.run(plan, cur, "await", "an await: the signal's write goes on", false)
				ch = chain{after: WhySignal}
			}
			continue
		}
		s.ActionSteps++
		kind := "action"
		switch {
		case cur.Compensating && cur.Unknown:
			kind = "finding out"
		case cur.Compensating:
			kind = "compensation"
		}
		if why := w.chains(plan, st, cur, &ch); why != "" {
			w.run(plan, cur, kind, why, false)
			// A message of its own, which carries the chain that may
			// follow.
			ch = chain{queue: durable.QueueAdvance}
			if cur.Compensating {
				ch.queue = durable.QueueCompensate
			}
			if m, ok := stepMessage(st); ok {
				ch.queue = m.Queue
			}
		} else {
			w.run(plan, cur, kind, "", true)
			s.ChainedSteps++
			ch.steps++
		}
		var out any
		call, callErr := plan.Call(st, w.now)
		if callErr != nil {
			callErr = saga.Permanent(callErr) // as in the coordinator: the step fails
		} else {
			s.Calls++
			out = call.Input
			switch {
			case w.fail != nil && w.fail(call):
				callErr = saga.Permanent(saga.NewError("Failed", "costed failure"))
			case p.Transient != nil && p.Transient(call):
				callErr = saga.NewError("Transient", "costed transient failure")
			}
		}
		if err := plan.Advance(st, saga.Event{Kind: saga.EventResult, Now: w.now, Output: out, Err: callErr, OnStep: onStep}); err != nil {
			return err
		}
		wrote(st)
	}
}

// fork walks the fork st waits on: its children one after the other until
// one fails, then the join; or the undo of the child st undoes.
func (w *walker) fork(plan *saga.Plan, st *saga.State, cur saga.Cursor, wrote func(*saga.State)) error {
	s := w.s
	id := plan.StepID(cur.Step)
	if cur.Compensating {
		u := &saga.Undone{Child: cur.Child}
		if c := w.children[durable.ChildID(st.SagaID, id, cur.Seq, cur.Child)]; c != nil && c.st.Status == durable.StatusSucceeded {
			s.Undos++
			childWrote := w.childWrote(c.listed)
			if err := c.plan.Advance(c.st, saga.Event{Kind: saga.EventUndo, Now: w.now, OnStep: w.onStep}); err != nil {
				return err
			}
			childWrote(c.st)
			w.depth++
			err := w.drive(c.plan, c.st, WhyUndo, childWrote)
			w.depth--
			if err != nil {
				return err
			}
			if c.st.Status == durable.StatusCompensationFailed {
				u.Parked = c.st.CompensationError
			}
		}
		if err := plan.Advance(st, saga.Event{Kind: saga.EventUndone, Now: w.now, Undone: u, OnStep: w.onStep}); err != nil {
			return err
		}
		wrote(st)
		return nil
	}
	j := &saga.Join{Version: cur.Version}
	outputs := make([]any, cur.Children)
	for k := range cur.Children {
		cp, cs, err := plan.Launch(st, k)
		if err != nil {
			return err
		}
		child := &saga.State{}
		if err := cp.Advance(child, saga.Event{Kind: saga.EventStart, Now: w.now, SagaID: durable.ChildID(st.SagaID, id, cur.Seq, k), Input: cs.Input, Child: cs, OnStep: w.onStep, Secret: walkSecret}); err != nil {
			return err
		}
		s.Children++
		s.ForkCounts++
		if plan.ForkTakesSignals(cur.Step) {
			s.LaunchReads++
		}
		c := &childRun{plan: cp, st: child, listed: cs.Link.Saga}
		w.children[child.SagaID] = c
		childWrote := w.childWrote(c.listed)
		s.childWrites = append(s.childWrites, childWrite{status: string(child.Status), listed: c.listed, first: true})
		w.depth++
		err = w.drive(cp, child, WhyStart, childWrote)
		w.depth--
		if err != nil {
			return err
		}
		if child.Status == durable.StatusCompensationFailed {
			j.Parked = append(j.Parked, k)
		}
		if child.Status != durable.StatusSucceeded {
			j.Failure = child.Failure
			if j.Failure == nil {
				j.Failure = &saga.StepError{Step: id, Type: lang.ErrorTypeGeneric, Message: "a child failed"}
			}
			break
		}
		j.Succeeded = append(j.Succeeded, k)
		outputs[k] = child.Output
	}
	if j.Failure == nil {
		j.Outputs = outputs
	}
	s.Joins++
	if err := plan.Advance(st, saga.Event{Kind: saga.EventJoin, Now: w.now, Join: j, OnStep: w.onStep}); err != nil {
		return err
	}
	wrote(st)
	return nil
}

// expire walks what the message that expires a finished tree does for
// st, at depth below the root (docs/PROTOCOL.md, "What expires"): it reads
// st and its ancestors, and per fork visit the fork record; it marks each
// child launched and the record; a child that can fork is read, and one
// that forked gets a message of its own.
func (w *walker) expire(plan *saga.Plan, st *saga.State, depth int) {
	s := w.s
	if len(st.Forks) == 0 {
		if depth == 0 && s.Params.Offloaded() {
			// A root that kept values as objects and never forked: one
			// message, which reads it and marks its objects ended.
			s.ExpireMessages++
			s.ExpireReads++
		}
		return
	}
	s.ExpireMessages++
	s.ExpireReads += 1 + depth + len(st.Forks)
	for _, f := range st.Forks {
		id, deep := plan.StepID(f.Step), plan.ChildrenFork(f.Step)
		for k := range f.Children {
			c := w.children[durable.ChildID(st.SagaID, id, f.Seq, k)]
			if c == nil {
				continue // never launched: the record says so
			}
			s.Expires++
			s.expireWRU += math.Ceil(float64(s.Params.StateBytes+itemBytes(s.Params, plan.Name(), string(c.st.Status), false)) / 1024)
			// Each child is read: for its objects (State.Objects, with
			// the template's bucket) and, if it can fork, for its forks.
			s.ExpireReads++
			if deep {
				w.expire(c.plan, c.st, depth+1)
			}
		}
		s.Expires++
		s.expireWRU++ // the fork record, under 1 KB
	}
}

func (w *walker) childWrote(listed bool) func(*saga.State) {
	return func(st *saga.State) {
		w.s.childWrites = append(w.s.childWrites, childWrite{status: string(st.Status), listed: listed})
	}
}

// delivers tells the cursors a delivery ends (an await, a callback) from
// those a timer ends (a wait).
func (p Params) delivers(plan *saga.Plan, cur saga.Cursor) bool {
	id, _ := plan.Awaits(cur)
	ls, ok := plan.Step(id)
	return ok && (ls.Kind == lang.KindAwait || ls.Callback != nil)
}

// deliver sends the waiting saga what its await or callback waits for.
// With Params.SignalsFirst an await's signal was kept before the saga
// reached it: the transition that parked the saga is counted as the keep's
// write (the status before it, kept) and the signal's as that transition's.
func (s *Saga) deliver(plan *saga.Plan, st *saga.State, now time.Time, onStep func(saga.StepRecord), wrote func(*saga.State)) (kept bool, _ error) {
	cur, _ := st.Pending()
	id, _ := plan.Awaits(cur)
	ls, _ := plan.Step(id)
	ev := saga.Event{Now: now, OnStep: onStep}
	if ls.Kind == lang.KindAwait {
		s.Signals++
		ev.Delivery = saga.Delivery{Signal: ls.Await.Signal, ID: fmt.Sprintf("cost-%d", s.Signals), Payload: s.Params.Signals[ls.Await.Signal]}
	} else {
		s.Callbacks++
		ev.Delivery = saga.Delivery{Token: plan.CallbackToken(st)}
	}
	n := len(s.Statuses)
	if s.Params.SignalsFirst && ls.Kind == lang.KindAwait && n > 1 {
		s.SignalsKept++
		s.Statuses[n-1] = s.Statuses[n-2]
		kept = true
	} else {
		s.Parked++
		if st.WakeAt().Sub(now) <= maxQueueDelay {
			s.StaleTimers++
		}
	}
	if _, err := plan.Receive(st, &ev); err != nil {
		return false, fmt.Errorf("cost of saga %s: deliver to %s: %w", plan.Name(), id, err)
	}
	wrote(st)
	return kept, nil
}

// chains says why the action step st waits on (cur) is not chained, by
// the engine's rule (engine.Coordinator's chainable, docs/PROTOCOL.md,
// "Chains"), or "" when it is. Each action takes Params.Duration, and the
// chain's invocation is taken to be fresh when its message's step starts.
func (w *walker) chains(plan *saga.Plan, st *saga.State, cur saga.Cursor, ch *chain) string {
	p := w.s.Params
	switch {
	case !p.Chaining():
		return WhyOff
	case !plan.Chains(cur):
		return WhyCallbackStep
	case ch.after != "":
		return ch.after
	}
	next, ok := stepMessage(st)
	switch {
	case !ok:
		return WhyOutbox
	case next.Delay > 0 && cur.Attempt > 1:
		return WhyBackoff
	case next.Delay > 0:
		return WhyDelayed
	case next.Queue != ch.queue && next.Queue == durable.QueueCompensate:
		return WhyCompensation
	case next.Queue != ch.queue:
		return WhyQueue
	case ch.steps >= p.ChainSteps:
		return WhyLimit
	}
	// Time: the chain's clock starts once the message's own step is
	// written; the invocation's, as that step starts.
	budget := time.Duration(float64(p.ChainTime) / p.BatchSize)
	if time.Duration(ch.steps)*p.Duration >= budget {
		return WhyTime
	}
	used := time.Duration(ch.steps+1) * p.Duration
	switch _, timeout := plan.Awaits(cur); {
	case timeout > 0 && p.FunctionTimeout-used < timeout+saga.StartReserve+saga.ResultReserve:
		return WhyTimeout
	case timeout == 0 && used >= saga.StartReserve:
		return WhyNotFresh
	}
	return ""
}

// stepMessage is st's outbox when it is one step message.
func stepMessage(st *saga.State) (durable.Message, bool) {
	if len(st.Outbox) != 1 || st.Outbox[0].Kind != durable.KindStep {
		return durable.Message{}, false
	}
	return st.Outbox[0], true
}

// maxQueueDelay is SQS's longest delay: a timer within it is a delayed
// message, a later one the tick's.
const maxQueueDelay = 15 * time.Minute

// count turns the walk into requests, units and dollars.
func (s *Saga) count(name string) {
	p := s.Params
	s.Transitions = len(s.Statuses)
	s.DynamoWrites = s.Transitions
	prev := ""
	for i, status := range s.Statuses {
		final := i == len(s.Statuses)-1
		item := p.StateBytes + p.valueBytes() + itemBytes(p, name, status, final)
		s.ItemBytes = max(s.ItemBytes, item)
		s.ItemOverheadBytes = max(s.ItemOverheadBytes, item-p.StateBytes-p.valueBytes())
		s.TableWRU += math.Ceil(float64(item) / 1024)
		entry := indexEntryBytes(p, name, status)
		s.IndexEntryBytes = max(s.IndexEntryBytes, entry)
		perIndexWrite := math.Ceil(float64(entry) / 1024)
		switch {
		case i == 0:
			s.IndexWRU += perIndexWrite // the entry is put
		case status != prev:
			s.StatusChanges++
			s.IndexWRU += 2 * perIndexWrite // the entry moves: a delete and a put
		}
		prev = status
	}
	// Child runs: their writes, on the table, and on the index only for a
	// child saga (a branch or an iteration has no entry); each end's count
	// in the fork record (under 1 KB: 1 unit).
	prevChild := ""
	for _, cw := range s.childWrites {
		item := p.StateBytes + p.valueBytes() + itemBytes(p, name, cw.status, false)
		s.TableWRU += math.Ceil(float64(item) / 1024)
		if cw.listed {
			perIndexWrite := math.Ceil(float64(indexEntryBytes(p, name, cw.status)) / 1024)
			switch {
			case cw.first:
				s.IndexWRU += perIndexWrite
			case cw.status != prevChild:
				s.IndexWRU += 2 * perIndexWrite
			}
		}
		prevChild = cw.status
	}
	s.TableWRU += float64(s.ForkCounts)
	s.DynamoWrites += len(s.childWrites) + s.ForkCounts
	// The finished tree's expiry: an UpdateItem of ttl per item, no index
	// write (ttl is not projected).
	s.TableWRU += s.expireWRU
	s.DynamoWrites += s.Expires
	// Each timer's by_due entry: put when the saga starts waiting, deleted
	// when the timer fires or a delivery wakes it (entries of about 100
	// bytes: 1 unit each).
	s.IndexWRU += 2 * float64(s.Timers+s.Parked)
	s.RRUPerRead = math.Ceil(float64(s.ItemBytes) / 4096)
	if p.StartQueue {
		s.QueueRequests = 1 + s.Signals + s.Callbacks
	}
	s.LambdaGBSeconds = float64(s.ActionSteps+s.QueueRequests) * p.Duration.Seconds() * float64(p.MemoryMB) / 1024
	s.Priced = s.price(s.ChainedSteps)
	s.Unchained = s.price(0)
	pr := ListPrices
	s.CostStepFnsSaga = float64(s.SFNTransitions) * pr.StepFunctionsPerMillion / 1e6
	s.Comparisons = s.compare()
}

// price turns the counts into requests and dollars, chained of the action
// steps running in a chain: no message, no read, no invocation of their
// own. Their writes and their actions' compute are the same either way.
func (s *Saga) price(chained int) Priced {
	p := s.Params
	steps := s.ActionSteps - chained // handled from a message of their own
	// Reads: one strongly consistent GetItem per message-handled action
	// step, per timer (and the tick's for a long one), per delivery (the
	// sender's), per stale timer (read and dropped), and the forks' and
	// expiry's reads.
	c := Priced{CostBreakdownUSD: map[string]float64{}}
	c.DynamoReads = steps + s.Timers + s.TickedTimers + s.Signals + s.Callbacks + s.Holds + s.StaleTimers +
		s.ForkCounts + s.Joins + s.Children + 3*s.Undos + s.LaunchReads + s.ExpireReads
	// Messages handled: the action steps', the timers', and the stale
	// timers' (dropped). A delivery's write sends the next step's message,
	// which its action step counts.
	c.Messages = steps + s.Timers + s.StaleTimers + s.ForkCounts + s.Joins + 2*s.Undos + s.ExpireMessages + s.QueueRequests
	chunks := math.Ceil(float64(p.MessageBytes) / 65536) // SQS bills 64 KB chunks
	messages := float64(c.Messages)
	c.SQSRequests = messages * chunks * (1 + 2/p.BatchSize) // a send each; a receive and a delete per batch
	c.LambdaInvokes = messages / p.BatchSize
	pr := ListPrices
	u := Usage{Invocations: c.LambdaInvokes, GBSeconds: s.LambdaGBSeconds, SQSRequests: c.SQSRequests,
		WRU: s.TableWRU + s.IndexWRU, RRU: float64(c.DynamoReads) * s.RRUPerRead}
	if p.Offloaded() {
		// A PUT per value made; a GET per value at each step handled
		// from its message (a chained step holds the values).
		c.ObjectPuts = p.LargeValues
		c.ObjectGets = p.LargeValues * steps
		// The end: a LIST of the saga's prefix per 1,000 objects, a COPY
		// of each onto itself with the ended tag.
		c.ObjectLists = (p.LargeValues + 999) / 1000
		c.ObjectCopies = p.LargeValues
		u.S3Puts, u.S3Gets = float64(c.ObjectPuts+c.ObjectLists+c.ObjectCopies), float64(c.ObjectGets)
	}
	// The same expressions as the functions' EstimatedCost (Prices.USD).
	var b [6]float64
	pr.parts(u, &b)
	for i, k := range Parts()[:len(b)] {
		c.CostBreakdownUSD[k] = b[i]
	}
	if p.Offloaded() {
		gb := float64(p.LargeValues*p.LargeValueBytes) / (1 << 30)
		c.CostBreakdownUSD["s3 storage"] = gb * pr.S3PerGBMonth * float64(p.ObjectDays) * 12 / 365
	} else {
		delete(c.CostBreakdownUSD, "s3 requests")
	}
	for _, k := range Parts() { // one order, so one total to the last bit
		c.CostLambdaSaga += c.CostBreakdownUSD[k]
	}
	return c
}

// PerMillionActionSteps is usd, per saga, per million of the path's
// action steps; 0 when the path runs no action step.
func (s *Saga) PerMillionActionSteps(usd float64) float64 {
	if s.ActionSteps == 0 {
		return 0
	}
	return usd * (1e6 / float64(s.ActionSteps)) // as sagactl cost's sagas for a million steps
}

// The saga item, as store/dynamo writes it under the status-keyed index
// design (docs/PROTOCOL.md, "The table"), sized by the Developer Guide's
// "DynamoDB item sizes and formats": each attribute is its name's bytes
// plus its value's (a string's bytes, a binary's raw bytes, a number about
// 1 byte per 2 significant digits plus 1).
const (
	hashBytes    = 64 // def: the definition's SHA-256, in hex
	nanosBytes   = 11 // a Unix time in ns: 19 digits
	secondsBytes = 6  // a Unix time in s: 10 digits
	versionBytes = 3  // v: up to 4 digits
)

// itemBytes is the saga item without its state: pk (SAGA#<id>), sk (STATE),
// v, st, name, def, upd, crt, state's name, gsi1pk (STATUS#<status>#<shard
// of 2 digits>), gsi1sk (20 digits, #, id), and ttl once the saga is final.
// A sweep's re-send counter (rs) is not counted: sweeps are not part of a
// path.
func itemBytes(p Params, name, status string, final bool) int {
	n := len("pk") + len("SAGA#") + p.SagaIDBytes +
		len("sk") + len("STATE") +
		len("v") + versionBytes +
		len("st") + len(status) +
		len("name") + len(name) +
		len("def") + hashBytes +
		len("upd") + nanosBytes +
		len("crt") + nanosBytes +
		len("state") +
		len("gsi1pk") + len("STATUS#") + len(status) + len("#00") +
		len("gsi1sk") + 20 + 1 + p.SagaIDBytes
	if final {
		n += len("ttl") + secondsBytes
	}
	return n
}

// indexEntryBytes is a by_status entry: the index's keys, the table's keys
// and the projected st, name, def and crt.
func indexEntryBytes(p Params, name, status string) int {
	return len("gsi1pk") + len("STATUS#") + len(status) + len("#00") +
		len("gsi1sk") + 20 + 1 + p.SagaIDBytes +
		len("pk") + len("SAGA#") + p.SagaIDBytes +
		len("sk") + len("STATE") +
		len("st") + len(status) +
		len("name") + len(name) +
		len("def") + hashBytes +
		len("crt") + nanosBytes
}
