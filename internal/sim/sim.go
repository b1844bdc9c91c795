// Package sim is a deterministic simulation of the durable protocol: the
// real coordinator and engine over a fake store and queue, driven by one
// seeded random source and a virtual clock, with faults at every boundary
// (crashes before the write, between write and send, between send and
// delete, mid-compensation; duplicate and reordered delivery; throttling;
// conflicting workers; poison messages; actions that time out after doing
// their effect) and on the users' side (generated definitions with every
// step kind, awaits and callbacks, deadlines, and loops through catches;
// signals and callback completions sent early, in time, late, twice,
// racing timers and cancels, with stale tokens (signals.go); outputs, nesting and errors at and
// past every limit; actions that run into the invocation's deadline;
// cancels during actions and between steps; resumes days after a saga
// parked). One goroutine runs everything, so a seed replays exactly.
// After each run the invariants of docs/RELIABILITY.md are checked.
package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memobjects"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Config sizes a run.
type Config struct {
	Seed  uint64
	Sagas int
	// FaultRate is the chance of a fault at each boundary while faults are on.
	FaultRate float64
	// Poison is how many poison messages to inject.
	Poison int
	// MaxReceives is the queues' redrive limit.
	MaxReceives int

	// Generated is how many definitions to generate (a third of the sagas
	// run one of them); 0 means one per 100 sagas, at least 20; negative
	// none.
	Generated int
	// EdgeRate is the chance that a visit of a generated saga's action
	// returns an output at or past a limit: half of them sized around
	// saga.MaxStateBytes, half nested around saga.MaxDataDepth.
	// 0 means 0.02.
	EdgeRate float64
	// ForkDefinitions is how many definitions with forks to generate
	// (forkgen.go; a quarter of the sagas run one of them); 0 means one
	// per 100 sagas, at least 10; negative none.
	ForkDefinitions int

	// Sabotage breaks a guarantee on purpose, to show the checks catch it:
	// "unconditional-writes" (the store ignores the version condition),
	// "moving-status-since" (every write moves the time the saga entered
	// its status, as an index keyed on the update time would),
	// "ignore-idempotency-keys" (services apply every call's effect),
	// "discard-large-results" (an action's result too large to keep is
	// thrown away and the step failed, though the service did the work) or
	// "clock-ahead" (the coordinator's clock runs an hour ahead, so timers
	// fire early), "clock-behind" (it runs an hour behind, so deadlines
	// pass unnoticed), "new-id-per-send" (senders give every send of a
	// signal a new id, so a repeat is a second signal), "drop-kept" (the
	// store loses the kept deliveries when a transition lands),
	// "drop-carrier" (the store loses which message carries a chain); and of
	// forks: "drop-join" (the queue loses every join), "undo-siblings-early"
	// (the undo of a fork's child k sends child k-1's with it),
	// "lying-fork-count" (a fork count's after-image hides the failed
	// child, so lanes go on after a failure) or "ended-before-end" (a
	// child is counted as ended as soon as it starts).
	Sabotage string
	// Objects keeps values over the threshold (8 KiB) by reference in an object store
	// (objects.go) whose puts fail, whose gets are throttled or miss,
	// and whose marks of an ended saga's objects fail, at FaultRate while
	// faults are on; the coordinator caches no value,
	// so that every read meets the store.
	Objects bool
	// NoPauses: no operator pauses (pause.go) during the run.
	NoPauses bool
	// NoLimits runs without action limits (limits.go): a run that limits
	// actions defers calls, which moves every random draw after the first
	// deferral, so a seed tuned to show a sabotage before limits were
	// modelled no longer replays the same run.
	NoLimits bool
}

// errCrash is a worker dying at a boundary: nothing after it happens.
var errCrash = errors.New("simulated crash")

// Report is what a run did and found.
type Report struct {
	Seed       uint64
	Sagas      int
	Handles    int
	Messages   int
	Faults     map[string]int
	Outcomes   map[durable.Status]int
	Checks     map[string]int // invariant -> how many times it was checked
	Violations map[string]int // invariant -> how many times it failed
	Examples   []string       // the first violations, in words
	VirtualEnd time.Duration  // virtual time the run took

	Generated      int    // generated definitions that validation accepted
	Refused        int    // generated definitions that validation refused (drawn again)
	RefusedExample string // why validation refused the first one
	GeneratedSagas int    // sagas that ran a generated definition
	// GeneratedForks counts the generated definitions with forks;
	// ForkSagas the sagas that ran one, Forks the fork visits that waited
	// on children, Children the child runs (each checked as a saga).
	GeneratedForks, ForkSagas, Forks, Children int
	ChildOutcomes                              map[durable.Status]int
}

// OK reports whether no invariant failed.
func (r *Report) OK() bool {
	for _, n := range r.Violations {
		if n > 0 {
			return false
		}
	}
	return true
}

func (r *Report) String() string {
	s := fmt.Sprintf("seed %d: %d sagas, %d messages handled, %d deliveries, virtual %s\n", r.Seed, r.Sagas, r.Handles, r.Messages, r.VirtualEnd.Round(time.Second))
	s += fmt.Sprintf("  definitions: %d generated (%d refused by validation and drawn again), run by %d sagas\n", r.Generated, r.Refused, r.GeneratedSagas)
	s += fmt.Sprintf("  forks: %d definitions with forks run by %d sagas; %d forks, %d child runs:", r.GeneratedForks, r.ForkSagas, r.Forks, r.Children)
	for _, st := range durable.Statuses() {
		if n := r.ChildOutcomes[st]; n > 0 {
			s += fmt.Sprintf(" %s=%d", st, n)
		}
	}
	s += "\n"
	s += "  outcomes:"
	for _, st := range durable.Statuses() {
		if n := r.Outcomes[st]; n > 0 {
			s += fmt.Sprintf(" %s=%d", st, n)
		}
	}
	s += "\n  faults:"
	for _, k := range sortedKeys(r.Faults) {
		s += fmt.Sprintf(" %s=%d", k, r.Faults[k])
	}
	s += "\n  invariants (checked/violated):"
	for _, k := range sortedKeys(r.Checks) {
		s += fmt.Sprintf(" %s=%d/%d", k, r.Checks[k], r.Violations[k])
	}
	for _, e := range r.Examples {
		s += "\n  VIOLATION: " + e
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// world is one run.
type world struct {
	tracing int // above 0 while a traced delivery or cancel runs (debugTrace)
	cfg     Config
	rng     *rand.Rand
	clock   *durable.ManualClock
	store   *faultyStore
	queue   *simQueue
	actions *simActions
	coord   *engine.Coordinator
	objects *faultyObjects // nil without Config.Objects
	limits  *simLimiter    // the action limits (limits.go)
	faults  bool
	report  *Report

	// bufs is a stack of per-Handle logs; a write that succeeds commits the top.
	bufs      []*handleLog
	committed map[string][]committedWrite // saga -> writes in order
	delivery  *delivery                   // the message being handled, for conflict injection
	depth     int

	resumeFailed map[string]bool // sagas whose last resume reported an error
	// held marks the transitions (saga id and version) that held a saga,
	// heard once each; operated names the operator's verb that wrote a
	// version (saga id and version): holds_kept checks what ended a hold.
	held     map[string]bool
	operated map[string]string
	// putBy is the handle that put each object: objects_end_with_tree
	// tells an object orphaned by a lost write from one the engine forgot.
	putBy map[string]*handleLog
	// handUndone lists, per saga, the compensation keys an operator undid
	// by hand before resuming with skip, in order.
	handUndone map[string][]string
	// quarantined sagas made far more action visits than their plan
	// allows: their messages are dropped so the run ends (visits_bounded).
	quarantined map[string]bool

	// plans holds every plan a saga may run, by hash: a child run's is
	// found by its state's DefinitionHash (forkgen.go).
	plans map[string]*saga.Plan
	// forks is what the fork checks need (forkcheck.go).
	forks *forkLedger
	// lastErr is, per saga, the last error a handle of its messages
	// returned (crashes and throttling aside), for the reports.
	lastErr map[string]string
	// handled counts the messages handled per saga (the busiest are
	// named in the report when a run handles far more than it should).
	handled map[string]int
	// pauses is what an operator paused during the run (pause.go).
	pauses pauseLedger

	// The senders (signals.go): logical signals by id, the receipts of
	// each callback token's completions, the tokens each saga's actions
	// got, and the send in progress (a racing copy of it may run first).
	nextSignal       int
	signals          map[string]*sentSignal
	callbackReceipts map[string]map[string]int
	tokens           map[string][]string
	sending          func(context.Context)
	delivering       int       // a sender's call is in progress (nested calls count)
	lastTick         time.Time // when tickBefore last ticked
}

// handleLog is what one Handle (or Start, Cancel, Resume) did before its write.
type handleLog struct {
	events []engine.StepEvent
	calls  []loggedCall
	// delivery is the logical signal id, or the callback token, that a
	// sender's handle delivers; empty for any other handle.
	delivery string
	// wrote marks the sagas this log's handle has written a version of:
	// a chain writes one saga again.
	wrote map[string]bool
	// dead: the worker died (a crash fault): nothing it does after that
	// reaches the store, the queue or a service. A chain that goes on
	// after an error must not outlive a crash.
	dead bool
}

// gone reports whether the worker of the current handle has died.
func (w *world) gone() bool { return len(w.bufs) > 0 && w.top().dead }

// wrote notes that the current handle wrote a version of saga id, and
// returns the log the write commits: a new one when the handle wrote that
// saga already with no call since (a chained step whose call could not
// be built), so that each write holds its own events.
func (w *world) wrote(sagaID string) *handleLog {
	top := w.top()
	if top.wrote[sagaID] {
		top = &handleLog{delivery: top.delivery, dead: top.dead}
		w.bufs[len(w.bufs)-1] = top
	}
	if top.wrote == nil {
		top.wrote = map[string]bool{}
	}
	top.wrote[sagaID] = true
	return top
}

// callLog is the log a call of saga id goes to: a new one when the
// current handle has written that saga already (a chain's next step),
// so that the call, and the events heard from here on, belong to the
// write that follows, if it lands, and not to the one before.
func (w *world) callLog(sagaID string) *handleLog {
	top := w.top()
	if !top.wrote[sagaID] {
		return top
	}
	next := &handleLog{delivery: top.delivery, dead: top.dead}
	w.bufs[len(w.bufs)-1] = next
	return next
}

type committedWrite struct {
	id      string // the saga written
	version uint64
	// What a store may index, as written: status_since_kept checks it.
	status                            durable.Status
	createdAt, statusSince, updatedAt time.Time
	// wakeAt is the timer the write set (durable.SagaRecord.WakeAt), and
	// at the simulation's clock when the store took the write (the time
	// the record says is the writer's word): timers_not_early checks that
	// no timer fired before it was due.
	wakeAt, at time.Time
	// log is the handle's log: the coordinator reports a transition's step
	// events once the store has accepted its write, so they arrive here
	// after the commit.
	log *handleLog
	// seq orders the write among every write, effect and fork failure
	// of the run (forkLedger).
	seq int
	// forkWait: the write leaves the saga waiting on a fork's children.
	forkWait bool
	// cancelled: the write compensates the saga for a cancel (a client's,
	// an operator's, or its fork's stop), or ends it compensated for one
	// (nothing to undo): holds_kept takes it as ending a hold.
	cancelled bool
	// kept: the write kept a delivery (the same version, Received+1).
	kept     bool
	received uint64
	// sum is the state as written, for sagas that take signals or
	// callbacks or have a deadline (nil for the others).
	sum *summary
}

// events are the step events of the write's saga in its handle's log: a
// handle that forks or joins writes other sagas too (children created,
// cancelled), each with its own events.
func (wr *committedWrite) events() []engine.StepEvent {
	var out []engine.StepEvent
	for _, ev := range wr.log.events {
		if ev.SagaID == wr.id {
			out = append(out, ev)
		}
	}
	return out
}

// calls are the calls of the write's saga in its handle's log.
func (wr *committedWrite) calls() []loggedCall {
	var out []loggedCall
	for _, c := range wr.log.calls {
		if c.SagaID == wr.id {
			out = append(out, c)
		}
	}
	return out
}

func (w *world) fault(name string) bool {
	if !w.faults || w.rng.Float64() >= w.cfg.FaultRate {
		return false
	}
	w.report.Faults[name]++
	if strings.Contains(name, "crash") && len(w.bufs) > 0 {
		w.top().dead = true
	}
	if w.tracing > 0 {
		fmt.Printf("%s     fault %s\n", w.clock.Now().Format("15:04:05.000"), name)
	}
	return true
}

// debugTrace, when set (by a test), prints every delivery and cancel of
// the sagas whose id starts with it, and the faults injected meanwhile.
var debugTrace string

func (w *world) top() *handleLog { return w.bufs[len(w.bufs)-1] }

// heard takes a step event of the current handle. A write that parks the
// saga has an operator resume it, long after.
func (w *world) heard(ev engine.StepEvent) {
	t := w.top()
	t.events = append(t.events, ev)
	w.noteHeld(ev)
	if sc := w.actions.scripts[ev.SagaID]; sc != nil && ev.Outcome == saga.OutcomeCompensationFailed && sc.lateResumes < 3 {
		sc.lateResumes++
		w.scheduleResume(ev.SagaID, time.Hour+time.Duration(w.rng.Int64N(int64(71*time.Hour))))
	}
}

// Run runs one seed to the end and checks the invariants.
func Run(cfg Config) (*Report, error) {
	if cfg.Sagas == 0 {
		cfg.Sagas = 1000
	}
	if cfg.FaultRate == 0 {
		cfg.FaultRate = 0.05
	}
	if cfg.MaxReceives == 0 {
		cfg.MaxReceives = 20
	}
	if cfg.EdgeRate == 0 {
		cfg.EdgeRate = 0.02
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &world{
		cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5a6a)), clock: durable.NewManualClock(start),
		report:    &Report{Seed: cfg.Seed, Sagas: cfg.Sagas, Faults: map[string]int{}, Outcomes: map[durable.Status]int{}, ChildOutcomes: map[durable.Status]int{}, Checks: map[string]int{}, Violations: map[string]int{}},
		committed: map[string][]committedWrite{}, resumeFailed: map[string]bool{}, handUndone: map[string][]string{}, quarantined: map[string]bool{},
		signals: map[string]*sentSignal{}, callbackReceipts: map[string]map[string]int{}, tokens: map[string][]string{},
		forks: newForkLedger(), lastErr: map[string]string{}, handled: map[string]int{},
		held: map[string]bool{}, operated: map[string]string{}, putBy: map[string]*handleLog{},
	}
	mem := memstore.New()
	w.store = &faultyStore{Store: mem, w: w}
	w.queue = newSimQueue(w)
	w.actions = newSimActions(w)
	var services engine.Invoker = w.actions
	if cfg.Sabotage == "discard-large-results" {
		services = discardLarge{w: w, inner: services}
	}
	var clock durable.Clock = w.clock
	switch cfg.Sabotage {
	case "clock-ahead":
		clock = shiftedClock{w.clock, time.Hour}
	case "clock-behind":
		clock = shiftedClock{w.clock, -time.Hour}
	}
	var objects durable.Objects
	if cfg.Objects {
		w.objects = &faultyObjects{Objects: memobjects.New(), w: w}
		objects = w.objects
	}
	w.limits = newSimLimiter(w, mem, clock)
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{
		Store: limitedStore{w.store, w.limits}, Queue: w.queue, Actions: recorder{w: w, inner: services}, Clock: clock, Rand: w.rng.Float64,
		OnStep: w.heard, Objects: objects,
		// No cache: every read goes to the object store, as on Lambda
		// instances that did not put the value, and a fault does not
		// depend on which goroutine filled a cache first.
		ValueCacheBytes: -1,
	})
	if err != nil {
		return nil, err
	}
	w.coord = coord
	if !cfg.NoLimits {
		if err := w.setLimits(context.Background()); err != nil {
			return nil, err
		}
	}
	plans, err := compilePlans()
	if err != nil {
		return nil, err
	}
	if cfg.Generated == 0 {
		cfg.Generated = max(20, cfg.Sagas/100)
	}
	gen, err := w.genPlans(max(cfg.Generated, 0))
	if err != nil {
		return nil, err
	}
	w.report.Generated = len(gen)
	forkPlans, err := w.genForkPlans(forkPlanCount(cfg))
	if err != nil {
		return nil, err
	}
	w.report.GeneratedForks = len(forkPlans)
	ctx := context.Background()

	// Start the sagas with faults on; a crashed start is retried by its client.
	w.faults = true
	sagas := make([]*sagaSpec, cfg.Sagas)
	for i := range sagas {
		sagas[i] = w.newSaga(i, plans, gen, forkPlans)
		w.pauses.note(durable.PauseName, sagas[i].plan.Name())
		w.start(ctx, sagas[i])
	}
	for i := range cfg.Poison {
		w.queue.poisonMessage(fmt.Appendf(nil, `{"v":1,"saga_id":"poison-%d","version":`, i))
	}
	// Run with faults, then without, until nothing is left to do; an operator
	// resumes parked sagas along the way.
	budget := cfg.Sagas * 400
	for phase := 0; phase < 2; phase++ {
		w.faults = phase == 0
		rounds := 0
		for steps := 0; steps < budget; steps++ {
			w.pauseTick(ctx, phase, steps)
			if !w.step(ctx) {
				if w.tickIdle(ctx) {
					continue
				}
				if rounds < 50 && (w.resumeParked(ctx, append(slices.Clone(sagas), w.forks.children...)) || w.releaseHeld(ctx, append(slices.Clone(sagas), w.forks.children...))) {
					rounds++
					continue
				}
				break
			}
			if phase == 0 && steps > budget/4 {
				break
			}
		}
	}
	w.report.VirtualEnd = w.clock.Now().Sub(start)
	if debugHook != nil {
		debugHook(w)
	}
	w.check(ctx, append(slices.Clone(sagas), w.forks.children...))
	w.checkForks(ctx, sagas)
	w.checkObjectsEnded(ctx)
	w.report.Forks, w.report.Children = w.forks.forks, len(w.forks.children)
	return w.report, nil
}

// debugHook, when set (by a test), sees the world before the checks.
var debugHook func(*world)

// shiftedClock is the sabotages "clock-ahead" and "clock-behind": the
// coordinator's time off the world's by a fixed amount.
type shiftedClock struct {
	c     *durable.ManualClock
	shift time.Duration
}

// Now returns the world's time, shifted.
func (a shiftedClock) Now() time.Time { return a.c.Now().Add(a.shift) }

// tickIdle is the scheduled tick when nothing else is left to do: time
// moves on to the earliest timer, and the tick sends its message. It
// reports whether it sent anything.
//
// A timer the tick leaves to a message (one due within a queue's delay of
// the write that set it) stays listed while its saga does not move: the
// clock then goes on to the next timer that is later, up to a few.
func (w *world) tickIdle(ctx context.Context) bool {
	due, err := w.store.SagaListDue(ctx, &durable.SagaListDueParams{Before: w.clock.Now().Add(2 * 365 * 24 * time.Hour), Limit: 200})
	if err != nil {
		return false
	}
	tried := 0
	for _, d := range due.Sagas {
		if tried > 0 && !d.WakeAt.After(w.clock.Now()) {
			continue
		}
		if gap := d.WakeAt.Sub(w.clock.Now()); gap > 0 {
			w.clock.Advance(gap)
		}
		res, _ := w.coord.Tick(ctx, &engine.TickParams{})
		if res != nil && res.Sent > 0 {
			return true
		}
		if tried++; tried > 5 {
			break
		}
	}
	return false
}

// tickBefore is the scheduled tick (every minute in production) when the
// clock is about to jump to t, the next message or operation: a timer due
// before t gets its tick first, at the time it is due, so that timers the
// tick sends are not skipped over. It reports whether the tick sent
// anything.
func (w *world) tickBefore(t time.Time) bool {
	due, err := w.store.SagaListDue(context.Background(), &durable.SagaListDueParams{Before: t, Limit: 1})
	if err != nil || len(due.Sagas) == 0 {
		return false
	}
	if d := due.Sagas[0].WakeAt.Sub(w.clock.Now()); d > 0 {
		w.clock.Advance(d)
	} else if w.clock.Now().Equal(w.lastTick) {
		return false // ticked at this time already
	}
	w.lastTick = w.clock.Now()
	res, _ := w.coord.Tick(context.Background(), &engine.TickParams{})
	return res != nil && res.Sent > 0
}

// start begins a saga, retrying a start that crashed or was throttled
// (Start is idempotent by saga id).
func (w *world) start(ctx context.Context, s *sagaSpec) {
	for attempt := 0; ; attempt++ {
		w.bufs = append(w.bufs, &handleLog{})
		_, err := w.coord.Start(ctx, &engine.StartParams{Plan: s.plan, SagaID: s.id, Input: s.input})
		w.bufs = w.bufs[:len(w.bufs)-1]
		if err == nil {
			return
		}
		if attempt > 100 {
			panic(fmt.Sprintf("saga %s never started: %v", s.id, err))
		}
	}
}

// step delivers one message (a random visible one, so delivery reorders),
// moving the clock to the next visible message when none is. It reports
// false when the queues are empty.
func (w *world) step(ctx context.Context) bool {
	if w.fault("extra_tick") {
		// A tick out of turn, looking further ahead: timers get a second
		// message, delayed to when they are due.
		_, _ = w.coord.Tick(ctx, &engine.TickParams{Ahead: time.Duration(1+w.rng.IntN(15)) * time.Minute})
	}
	d, ok := w.queue.next()
	if !ok {
		return false
	}
	if d.op != nil {
		d.op(ctx)
		return true
	}
	w.report.Messages++
	w.handle(ctx, d)
	return true
}

func (w *world) handle(ctx context.Context, d *delivery) {
	if len(w.quarantined) > 0 {
		if msg, err := durable.DecodeMessage(d.body); err == nil && w.quarantined[msg.SagaID] {
			return // dropped: a saga looping past its visit bound
		}
	}
	w.report.Handles++
	if msg, err := durable.DecodeMessage(d.body); err == nil {
		d.kind, d.sagaID, d.version = msg.Kind, msg.SagaID, msg.Version
		w.handled[msg.SagaID]++
		if debugTrace != "" && strings.HasPrefix(msg.SagaID, debugTrace) {
			fmt.Printf("%s handle %s %s v%d step=%s att=%d child=%d depth=%d\n", w.clock.Now().Format("15:04:05.000"), msg.SagaID, msg.Kind, msg.Version, msg.Step, msg.Attempt, msg.Child, w.depth)
			w.tracing++
			defer func() { w.tracing-- }()
		}
	}
	w.bufs = append(w.bufs, &handleLog{})
	prev := w.delivery
	w.delivery = d
	w.depth++
	out, err := w.coord.Handle(ctx, d.body)
	w.checkDeferral(out, d)
	if w.tracing > 0 {
		fmt.Printf("%s   -> %v\n", w.clock.Now().Format("15:04:05.000"), err)
	}
	w.depth--
	w.delivery = prev
	w.bufs = w.bufs[:len(w.bufs)-1]
	if w.depth > 0 {
		return // a nested (conflicting) worker: the outer one owns the message
	}
	if err == nil && w.fault("crash_after_send_before_delete") {
		err = errCrash
	}
	if err == nil && w.fault("duplicate_delivery") {
		d.errs = append(d.errs, "ok")
		w.queue.release(d, w.clock.Now()) // not deleted: delivered again
		return
	}
	if err != nil {
		// errors.Join puts one error a line: keep the report's line whole.
		d.errs = append(d.errs, strings.ReplaceAll(err.Error(), "\n", " + "))
		if !errors.Is(err, errCrash) && !errors.Is(err, durable.ErrThrottled) {
			w.lastErr[d.sagaID] = fmt.Sprintf("%s: %v", d.kind, err)
		}
		w.queue.release(d, w.clock.Now().Add(30*time.Second)) // visibility timeout
		return
	}
	w.queue.delete(d)
}

// quarantine stops a saga that made far more action visits than its plan
// allows (a loop the engine did not bound): its messages are dropped from
// now on, and the check reports it.
func (w *world) quarantine(saga string) {
	if !w.quarantined[saga] {
		w.quarantined[saga] = true
		w.report.Faults["quarantined_loop"]++
	}
}
