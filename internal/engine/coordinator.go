package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"reflect"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// CoordinatorConfig wires a Coordinator. Store and Queue are required.
type CoordinatorConfig struct {
	Store durable.Store // keeps the sagas and their definitions
	Queue durable.Queue // carries the messages of every transition's outbox
	// Actions runs the actions Handle calls. Leave it nil for a coordinator
	// that only starts, reads, cancels, resumes and sweeps sagas (a client,
	// the sweep): its Handle returns ErrNoActions and leaves the message.
	Actions Invoker
	// Plans finds definitions by hash; default: a cache over Store.
	Plans *Plans
	// Clock defaults to durable.SystemClock.
	Clock durable.Clock
	// Rand draws jitter in [0, 1); default: math/rand/v2.
	Rand func() float64
	// NewID makes saga ids for Start without one; default: 32 random hex digits.
	NewID func() string
	// Logger gets one line per handled message (ids, step, version,
	// outcome, duration; never values); default: discard.
	Logger *slog.Logger
	// OnStep, when set, hears of every step of every transition.
	OnStep func(StepEvent)
	// Tracer, when set, opens a span for each saga started, each message
	// handled and each action called, all of one saga in one trace (see
	// Tracer); nil: no spans, at no cost.
	Tracer Tracer
	// MaxConflictRetries bounds reloads after lost conditional writes in one
	// Handle; default 8.
	MaxConflictRetries int
	// ExpireBatch bounds the items one KindExpire message marks (and the
	// children it reads) before the walk of a finished tree goes on in
	// another message; default 1,000, well within a Lambda's 30 s.
	ExpireBatch int
	// ChainSteps bounds the steps one message runs after its own, each
	// from the state it holds, with no queue hop (docs/PROTOCOL.md,
	// "Chains"); default 50 (DefaultChainSteps); negative: none, every
	// step has its own message.
	ChainSteps int
	// ChainTime bounds how long a chain goes on starting steps, from the
	// write of the message's own step; default 5 s (DefaultChainTime).
	// It is shared with the records waiting behind it, and kept under half
	// the record's visibility timeout when its worker knows it (Batch).
	ChainTime time.Duration
	// BeforeChained, when set, is called before each chained step with
	// the state the chain holds, which it must not change: the property
	// test compares it with a fresh read (docs/PROTOCOL.md, "Chains").
	BeforeChained func(held *saga.State)
	// PausePoll is how long the message of a paused attempt waits before
	// it looks again; default PausePoll (pause.go).
	PausePoll time.Duration
	// Objects, when set, keeps the values of a saga larger than
	// OffloadBytes (an input field, an action's output, a payload) as
	// objects, its state holding references (offload.go): each value up
	// to saga.MaxValueBytes, the state of references and small values
	// within saga.MaxStateBytes. Nil: every value inline, within the
	// state's limit.
	Objects durable.Objects
	// OffloadBytes is the threshold with Objects; default
	// DefaultOffloadBytes.
	OffloadBytes int
	// ValueCacheBytes bounds the values kept in memory by hash with
	// Objects; default DefaultValueCacheBytes; negative: none, every read
	// of a value goes to Objects (the simulation, whose faults must not
	// depend on which goroutine filled a cache first).
	ValueCacheBytes int64
}

// Coordinator runs the durable protocol: every message is handled by
// loading the saga, running its pending action, advancing it, writing it
// back conditionally, and sending the outbox. The Lambda functions, the
// embedded runner and sagactl all use it. It is safe for concurrent use.
type Coordinator struct {
	cfg CoordinatorConfig
	log *slog.Logger
	// ticked remembers the timers this process's ticks have sent a
	// message for (saga id and version), so that ticks a minute apart, or
	// a second apart in the embedded runtime, send each timer once.
	tickedMu sync.Mutex
	ticked   map[tickedTimer]time.Time // -> when it is due
	// unheard counts, per saga, the writes whose step events OnStep has
	// not heard yet (see Unreported).
	unheardMu sync.Mutex
	unheard   map[string]int
	// values caches the values kept as objects (offload.go).
	values valueCache
	// pauses caches the operators' pauses (pause.go).
	pauses *pauseCache
	// limits caches the actions' limits (limit.go).
	limits limitCache
}

type tickedTimer struct {
	sagaID  string
	version uint64
}

// NewCoordinator checks cfg and fills its defaults.
func NewCoordinator(cfg CoordinatorConfig) (*Coordinator, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("coordinator: a Store is required")
	case cfg.Queue == nil:
		return nil, errors.New("coordinator: a Queue is required")
	}
	if cfg.Plans == nil {
		cfg.Plans = NewPlans(cfg.Store, saga.Options{})
	}
	if cfg.Clock == nil {
		cfg.Clock = durable.SystemClock{}
	}
	if cfg.Rand == nil {
		cfg.Rand = mrand.Float64
	}
	if cfg.NewID == nil {
		cfg.NewID = randomID
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxConflictRetries < 0 {
		return nil, fmt.Errorf("coordinator: MaxConflictRetries is %d; it must be 0 (the default, 8) or more", cfg.MaxConflictRetries)
	}
	if cfg.MaxConflictRetries == 0 {
		cfg.MaxConflictRetries = 8
	}
	if cfg.ExpireBatch < 0 {
		return nil, fmt.Errorf("coordinator: ExpireBatch is %d; it must be 0 (the default, %d) or more", cfg.ExpireBatch, defaultExpireBatch)
	}
	if cfg.ExpireBatch == 0 {
		cfg.ExpireBatch = defaultExpireBatch
	}
	if cfg.ChainSteps == 0 {
		cfg.ChainSteps = DefaultChainSteps
	}
	if cfg.ChainTime < 0 {
		return nil, fmt.Errorf("coordinator: ChainTime is %s; it must be 0 (the default, %s) or more", cfg.ChainTime, DefaultChainTime)
	}
	if cfg.ChainTime == 0 {
		cfg.ChainTime = DefaultChainTime
	}
	if cfg.OffloadBytes < 0 {
		return nil, fmt.Errorf("coordinator: OffloadBytes %d must be 0 (the default) or more", cfg.OffloadBytes)
	}
	if cfg.OffloadBytes == 0 {
		cfg.OffloadBytes = DefaultOffloadBytes
	}
	if cfg.PausePoll <= 0 {
		cfg.PausePoll = PausePoll
	}
	if cfg.ValueCacheBytes == 0 {
		cfg.ValueCacheBytes = DefaultValueCacheBytes
	}
	return &Coordinator{cfg: cfg, log: cfg.Logger, values: valueCache{max: cfg.ValueCacheBytes}, pauses: newPauseCache(cfg.Store)}, nil
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// StartParams starts a saga: of a compiled definition (Plan), or of the
// current version of a deployed name (Name).
type StartParams struct {
	Plan *saga.Plan // the compiled definition to run; nil: the current version of Name
	// Name, when Plan is nil, names a deployed saga (Deploy): the start
	// runs its current version, as Plans.Current finds it (a deploy made
	// by another process is seen within CurrentTTL). With a Plan, Name is
	// empty or the plan's name.
	Name   string
	SagaID string         // empty: a new random id
	Input  map[string]any // checked and converted by Plan.CheckInput; nil: an empty object
}

// Start registers the plan's definition, writes the saga's first version
// and sends its first message. It is idempotent by saga id: starting an
// existing saga with the same input returns it (and re-sends its first
// message if it has not moved on), with a different input it is
// durable.ErrExists. A start by name of an existing saga of that name
// compares the input with the version the saga pinned, not the current
// one: a start repeated after a deploy still returns the saga. A name
// never deployed is an error wrapping durable.ErrNotFound.
func (c *Coordinator) Start(ctx context.Context, p *StartParams) (st *saga.State, err error) {
	st, _, err = c.start(ctx, p, false)
	return st, err
}

// start is Start; with anyInput, an existing saga is returned whatever
// its input and definition (SignalWithStart). created reports whether
// this call wrote the saga.
func (c *Coordinator) start(ctx context.Context, p *StartParams, anyInput bool) (st *saga.State, created bool, err error) {
	plan, err := c.startPlan(ctx, p)
	if err != nil {
		return nil, false, err
	}
	id := p.SagaID
	if id == "" {
		id = c.cfg.NewID()
	}
	if err := checkSagaID(id); err != nil {
		return nil, false, err
	}
	if durable.IsChildID(id) {
		return nil, false, fmt.Errorf("start: saga id %q has the form of a child run's id (<parent>.<step>.<visit>.<index>): forks name their children so; choose another", id)
	}
	input, err := plan.CheckInputWithin(p.Input, c.offloadBytes())
	if err != nil {
		if p.SagaID != "" && (p.Plan == nil || anyInput) {
			// A repeat of a start that landed, after a deploy whose input
			// this one does not satisfy, is judged by the version the saga
			// pinned (existing), not refused: a read, on this path only.
			switch _, gerr := c.cfg.Store.SagaGet(ctx, &durable.SagaGetParams{SagaID: id}); {
			case gerr == nil:
				st, err = c.existing(ctx, id, plan, nil, p, anyInput)
				return st, false, err
			case !errors.Is(gerr, durable.ErrNotFound):
				// Not known to be refused: try again.
				return nil, false, fmt.Errorf("start %s: %w", id, gerr)
			}
		}
		return nil, false, err
	}
	var trace saga.TraceContext
	if c.cfg.Tracer != nil {
		var span Span
		ctx, span = c.cfg.Tracer.StartSpan(ctx, saga.TraceContext{}, SpanParams{Kind: SpanSaga, SagaID: id, SagaName: plan.Name(), Version: 1, Start: c.cfg.Clock.Now()})
		trace = span.TraceContext()
		defer func() {
			var end SpanEnd
			if st != nil {
				end.Outcome, end.Version, end.Status = string(st.Status), st.Version, st.Status
			}
			end.Err, end.End = err, c.cfg.Clock.Now()
			span.End(end)
		}()
	}
	st, err = c.create1(ctx, id, plan, input, trace)
	if errors.Is(err, durable.ErrExists) {
		st, err = c.existing(ctx, id, plan, input, p, anyInput)
		return st, false, err
	}
	// An error after the write comes with the state written.
	return st, st != nil, err
}

// startPlan is the plan a start runs: p.Plan, or the current version of
// p.Name.
func (c *Coordinator) startPlan(ctx context.Context, p *StartParams) (*saga.Plan, error) {
	switch {
	case p.Plan != nil && p.Name != "" && p.Name != p.Plan.Name():
		return nil, fmt.Errorf("start: the plan is of saga %s, not %s", p.Plan.Name(), p.Name)
	case p.Plan != nil:
		return p.Plan, nil
	case p.Name == "":
		return nil, errors.New("start: a Plan or a Name is required")
	}
	plan, err := c.cfg.Plans.Current(ctx, p.Name, c.cfg.Clock.Now())
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	return plan, nil
}

// create1 writes the first version of saga id of plan and sends its first
// message, its first span trace: durable.ErrExists when the saga exists.
// On an error after the write, it returns the state written with it.
func (c *Coordinator) create1(ctx context.Context, id string, plan *saga.Plan, input map[string]any, trace saga.TraceContext) (st *saga.State, err error) {
	c.cfg.Plans.Add(plan)
	if err := c.cfg.Plans.ensureStored(ctx, c.cfg.Store, plan); err != nil {
		return nil, fmt.Errorf("start %s: store definition: %w", id, err)
	}
	now, rnd := c.cfg.Clock.Now(), c.cfg.Rand()
	var secret []byte
	if plan.HasCallbacks() {
		secret = make([]byte, 16)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("start %s: callback secret: %w", id, err)
		}
	}
	var h heard
	st, rec, err := c.first(ctx, func(st *saga.State, limit int) error {
		return plan.Advance(st, saga.Event{Kind: saga.EventStart, Now: now, Rand: rnd, SagaID: id, Input: input, Secret: secret, OnStep: c.observer(plan, &h, id, st, nil), StoreLimit: limit, OffloadBytes: c.offloadBytes()})
	}, trace)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	err = c.create(ctx, id, rec, &h)
	if errors.Is(err, durable.ErrExists) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	if err := c.sendOutbox(ctx, st, plan); err != nil {
		// Launching its children may quote the saga's values (a store's
		// error): masked, as every error a saga's handling logs.
		err = plan.Redactor(st).Error(err)
		return st, fmt.Errorf("start %s: saga stored, first message not sent (start it again with the same id to retry): %w", id, err)
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "saga started", slog.String("saga_id", id), slog.String("saga", plan.Name()), slog.String("status", string(st.Status)))
	return st, nil
}

// existing returns the saga id that a start of plan with input (as
// converted by it; p as the caller gave it) found stored, if it is the
// same start, or with anyInput whatever it is, and re-sends its first
// message if it has not moved on.
func (c *Coordinator) existing(ctx context.Context, id string, plan *saga.Plan, input map[string]any, p *StartParams, anyInput bool) (*saga.State, error) {
	st, err := c.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	pinned := plan
	same := st.DefinitionHash == plan.Hash() && reflect.DeepEqual(st.Input, input)
	if !same && (anyInput || (p.Plan == nil && st.Name == plan.Name())) {
		// Deployed again since this saga started, or any saga will do:
		// the saga runs the version it pinned.
		if pinned, err = c.cfg.Plans.Get(ctx, st.DefinitionHash); err != nil {
			return nil, fmt.Errorf("start %s: %w", id, err)
		}
		if !anyInput {
			pinnedInput, err := pinned.CheckInputWithin(p.Input, c.offloadBytes())
			same = err == nil && reflect.DeepEqual(st.Input, pinnedInput)
		}
	}
	if !same && !anyInput {
		return nil, fmt.Errorf("start %s: %w with a different definition or input", id, durable.ErrExists)
	}
	if st.Version == 1 {
		// A crash may have come between the create and the send.
		if err := c.resendOutbox(ctx, st, pinned); err != nil {
			return nil, fmt.Errorf("start %s: re-send first message: %w", id, err)
		}
	}
	return st, nil
}

// Get reads a saga's state.
func (c *Coordinator) Get(ctx context.Context, sagaID string) (*saga.State, error) {
	if err := checkSagaID(sagaID); err != nil {
		return nil, err
	}
	rec, err := c.cfg.Store.SagaGet(ctx, &durable.SagaGetParams{SagaID: sagaID})
	if err != nil {
		return nil, err // stores name the saga in their errors
	}
	st := &saga.State{}
	refs, err := st.UnmarshalBinaryRefs(rec.State)
	if err != nil {
		return nil, fmt.Errorf("saga %s: %w", sagaID, err)
	}
	if c.cfg.Objects != nil { // without, a reader sees the references
		if err := c.hydrate(ctx, st, refs); err != nil {
			return nil, err
		}
	}
	st.Resends, st.Received = rec.Resends, rec.Received
	return st, nil
}

// Cancel stops a running saga and compensates what it completed.
func (c *Coordinator) Cancel(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.apply(ctx, sagaID, saga.EventCancel, false)
}

// Resume continues the compensation of a saga parked in compensation_failed.
func (c *Coordinator) Resume(ctx context.Context, sagaID string) (*saga.State, error) {
	resumedChild, err := c.resumeParkedChild(ctx, sagaID)
	if err != nil {
		return nil, err
	}
	st, err := c.apply(ctx, sagaID, saga.EventResume, false)
	if resumedChild && errors.Is(err, saga.ErrInvalidEvent) {
		// The child it parked on, resumed first, ended at once, and its
		// end moved the saga on by itself: the resume has done its work.
		if now, gerr := c.Get(ctx, sagaID); gerr == nil && now.Status != durable.StatusCompensationFailed {
			return now, nil
		}
	}
	return st, err
}

// SkipCompensation continues a saga parked in compensation_failed without
// running the compensation that failed: an operator has undone that step
// by hand. The rest of the compensations run as on Resume. Unlike Resume,
// it is not idempotent on a saga already compensating: that saga may have
// been resumed without the skip, so it returns saga.ErrInvalidEvent and
// skips nothing.
func (c *Coordinator) SkipCompensation(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.apply(ctx, sagaID, saga.EventResume, true)
}

// Retry runs the step a held saga failed on again, with its retry
// policy's attempts afresh and the same idempotency key. A retry whose
// write landed (the step's first attempt of a fresh budget pending) is
// answered again without a change; a saga in any other status is
// saga.ErrInvalidEvent, as is a held saga whose deadline has passed.
func (c *Coordinator) Retry(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.apply(ctx, sagaID, saga.EventRetry, false)
}

// Compensate compensates a held saga, as its failure would have without
// on_failure: hold. A saga already compensating (or compensated) is
// answered without a change; one in any other status is
// saga.ErrInvalidEvent.
func (c *Coordinator) Compensate(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.apply(ctx, sagaID, saga.EventCompensate, false)
}

// apply writes an operator's event: a cancel, a resume (skip: without
// the compensation that failed), a retry or a compensate of a held saga.
func (c *Coordinator) apply(ctx context.Context, sagaID string, kind saga.EventKind, skip bool) (*saga.State, error) {
	if err := checkSagaID(sagaID); err != nil {
		return nil, err
	}
	for range c.cfg.MaxConflictRetries {
		rec, st, plan, err := c.load(ctx, sagaID)
		if err != nil {
			return nil, err
		}
		if kind == saga.EventResume && skip && already(st, kind) {
			// Not a retry we can recognise: a plain resume may have landed
			// first and sent the failed compensation on its way. Skipping
			// now would skip the wrong step; saying yes would hide that the
			// compensation runs again.
			return nil, fmt.Errorf("%w: saga %s is %s, not parked: nothing was skipped (if the compensation fails again the saga parks, and it can be skipped then)", saga.ErrInvalidEvent, sagaID, st.Status)
		}
		if already(st, kind) {
			// A retry of a cancel or resume whose write landed but whose
			// send may not have: send the stored outbox again (duplicates
			// are dropped by the protocol) and report success.
			if err := c.resendOutbox(ctx, st, plan); err != nil {
				return st, fmt.Errorf("%s %s: re-send: %w", kind, sagaID, err)
			}
			return st, nil
		}
		var h heard
		s := subject{sagaID: sagaID, plan: plan}
		t := transition{
			advance: func(st *saga.State, limit int) error {
				return plan.Advance(st, saga.Event{Kind: kind, Now: c.cfg.Clock.Now(), Rand: c.cfg.Rand(), Skip: skip, StoreLimit: limit, OffloadBytes: c.offloadBytes(), OnStep: c.observer(plan, &h, sagaID, st, nil)})
			},
		}
		st, err = c.commit(ctx, &s, &t, &h, st, rec.Version)
		if errors.Is(err, durable.ErrConflict) {
			continue // read it again: the cancel or resume may be done, or refused, now
		}
		if err != nil {
			return nil, err
		}
		if err := c.publish(ctx, st, plan); err != nil {
			return st, fmt.Errorf("%s %s: %w", kind, sagaID, err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("%s %s: %w after %d tries", kind, sagaID, durable.ErrConflict, c.cfg.MaxConflictRetries)
}

// already reports whether st is where a cancel, resume, retry or
// compensate leads, so that the event is a repeat rather than a mistake:
// compensating (or, for a cancel, finished after being cancelled; for a
// retry, the first attempt of a fresh budget pending).
func already(st *saga.State, kind saga.EventKind) bool {
	switch kind {
	case saga.EventCancel:
		return st.CancelRequested || st.Status == durable.StatusCompensating || (st.Status.Final() && st.Status != durable.StatusSucceeded && st.Failure != nil && st.Failure.Type == lang.ErrorTypeCancelled)
	case saga.EventResume:
		if st.Status == durable.StatusRunning {
			// A failed fork's undo whose failure a catch takes runs so.
			cur, ok := st.Pending()
			return ok && cur.Fork && cur.Compensating
		}
		return st.Status == durable.StatusCompensating
	case saga.EventRetry:
		cur, ok := st.Pending()
		return ok && st.Status == durable.StatusRunning && !cur.Compensating && cur.Budget > 0 && cur.Attempt == cur.Budget+1
	case saga.EventCompensate:
		return st.Status == durable.StatusCompensating || st.Status == durable.StatusCompensated
	}
	return false
}

// List pages through sagas.
func (c *Coordinator) List(ctx context.Context, p *durable.SagaListParams) (*durable.SagaListResult, error) {
	return c.cfg.Store.SagaList(ctx, p)
}

func (c *Coordinator) load(ctx context.Context, sagaID string) (*durable.SagaRecord, *saga.State, *saga.Plan, error) {
	return c.loadAs(ctx, sagaID, true)
}

// loadAs is load, with the references of the state replaced by their
// values when hydrated is set, and left as they are otherwise (a reader
// of the saga's status and tree alone, as the expiry: no object is read).
func (c *Coordinator) loadAs(ctx context.Context, sagaID string, hydrated bool) (*durable.SagaRecord, *saga.State, *saga.Plan, error) {
	rec, err := c.cfg.Store.SagaGet(ctx, &durable.SagaGetParams{SagaID: sagaID})
	if errors.Is(err, durable.ErrNotFound) {
		return nil, nil, nil, fmt.Errorf("%w (%w)", err, errSagaMissing)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	st := &saga.State{}
	refs, err := st.UnmarshalBinaryRefs(rec.State)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("saga %s: %w", sagaID, err)
	}
	if err := c.hydrate(ctx, st, refs && hydrated); err != nil {
		return nil, nil, nil, err
	}
	st.Received = rec.Received // the store's count is what writes are conditional on
	plan, err := c.cfg.Plans.Get(ctx, st.DefinitionHash)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("saga %s: %w", sagaID, err)
	}
	if err := plan.CheckState(st); err != nil {
		return nil, nil, nil, fmt.Errorf("saga %s: %w: %v", sagaID, ErrDamagedState, err)
	}
	if st.Vars == nil && !st.Status.Final() {
		st.Vars = map[string]any{} // an item written without vars: steps write into it
	}
	return rec, st, plan, nil
}

// checkSagaID refuses an id that cannot name a saga, without echoing it
// (it may hold anything a caller passed).
func checkSagaID(id string) error {
	if durable.ValidSagaID(id) {
		return nil
	}
	return fmt.Errorf("%w: not a saga id (%d bytes): use 1 to 128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit", saga.ErrInvalidInput, len(id))
}
