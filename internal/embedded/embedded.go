// Package embedded runs sagas in one process: the memory store and queue,
// the coordinator, and a worker per queue, the same protocol the Lambda
// functions run. sagactl run uses it; so can a service's tests, which
// send signals and complete callback tokens in process.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Config sets up a Runtime. Actions is required.
type Config struct {
	// Actions runs the actions the sagas call, an *engine.Registry for
	// instance; required.
	Actions engine.Invoker
	// Store, Queue and Receiver default to the memory implementations; set
	// all three to run on DynamoDB and SQS (or their emulators) instead,
	// with the workers polling like Lambda's event source mapping.
	Store    durable.Store
	Queue    durable.Queue    // the sending side of the queues Receiver reads
	Receiver durable.Receiver // the workers receive from it
	// Workers per queue; default 2.
	Workers int
	// Visibility is how long a message stays hidden while handled before it
	// is delivered again; default 30s.
	Visibility time.Duration
	// Logger gets the coordinator's and the workers' lines; default: discard.
	Logger *slog.Logger
	// OnStep hears of every step of every saga.
	OnStep func(engine.StepEvent)
	// PollInterval is how often Wait looks at a saga; default 2ms.
	PollInterval time.Duration
	// Clock is the sagas' time; default the system clock. A
	// *durable.ManualClock runs them in virtual time (memory store and
	// queue only): whenever nothing is in flight, the runtime moves the
	// clock on to the next thing due (a delayed message, a timer), so a
	// saga that waits 30 days, or retries with long backoffs, runs in
	// milliseconds. Time does not pass the timeout of a saga that waits
	// on a signal or a callback token while no one is in Run or Wait
	// (timers before it fire): a test can see it waiting (WaitReceiving)
	// and send what it waits on before its timeout; calling Wait lets the
	// timeout pass.
	Clock durable.Clock
	// TickInterval is how often the runtime fires due timers
	// (engine.Coordinator.Tick) on a real clock; default 1s.
	TickInterval time.Duration
	// Objects, when set, keeps values larger than OffloadBytes (default
	// engine.DefaultOffloadBytes) as objects there, the sagas' states
	// holding references (engine.CoordinatorConfig.Objects); nil: every
	// value inline, within the state's limit.
	Objects      durable.Objects
	OffloadBytes int
}

// ErrClosed: the runtime was closed; nothing would run the saga.
var ErrClosed = errors.New("embedded runtime closed")

// Runtime is a running in-process saga system.
type Runtime struct {
	Store    durable.Store    // Config.Store, or the memory store
	Queue    durable.Queue    // Config.Queue, or the memory queue
	Receiver durable.Receiver // Config.Receiver, or the memory queue
	// Coordinator starts, reads, cancels and resumes sagas; the
	// runtime's workers handle their messages with it.
	Coordinator *engine.Coordinator

	cfg     Config
	closed  atomic.Bool // Close was called: nothing runs sagas any more
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	plans   *engine.Plans
	waiters atomic.Int64 // calls in Wait: virtual time may pass awaits' and callbacks' timeouts
	// waitedMu guards waited: the sagas calls in Wait wait for, and how
	// many calls wait for each.
	waitedMu sync.Mutex
	waited   map[string]int
	// moving is held (for writing) while virtual time decides to move and
	// moves, and (for reading) by every delivery through the runtime, so
	// that a signal cannot land between the reads that decide and the
	// move: virtual time never passes a timer a delivery has just replaced
	// with work.
	moving sync.RWMutex
}

// Start builds the runtime and starts its workers. Call Close when done.
func Start(cfg Config) (*Runtime, error) {
	if cfg.Actions == nil {
		return nil, errors.New("embedded: Actions are required")
	}
	if cfg.Workers == 0 {
		cfg.Workers = 2
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 2 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = durable.SystemClock{}
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = time.Second
	}
	virtual, _ := cfg.Clock.(*durable.ManualClock)
	r := &Runtime{cfg: cfg, Store: cfg.Store, Queue: cfg.Queue, Receiver: cfg.Receiver}
	var mq *memqueue.Queue
	switch {
	case cfg.Store == nil && cfg.Queue == nil && cfg.Receiver == nil:
		mq = memqueue.New(memqueue.Config{Visibility: cfg.Visibility, PollInterval: time.Millisecond, Clock: cfg.Clock})
		r.Store, r.Queue, r.Receiver = memstore.New(), mq, mq
	case cfg.Store == nil || cfg.Queue == nil || cfg.Receiver == nil:
		return nil, errors.New("embedded: set Store, Queue and Receiver together, or none")
	case virtual != nil:
		return nil, errors.New("embedded: a manual clock (virtual time) needs the memory store and queue")
	}
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: r.Store, Queue: r.Queue, Actions: cfg.Actions, Logger: cfg.Logger, OnStep: cfg.OnStep, Clock: cfg.Clock,
		Objects: cfg.Objects, OffloadBytes: cfg.OffloadBytes})
	if err != nil {
		return nil, err
	}
	r.Coordinator = coord
	r.plans = engine.NewPlans(r.Store, saga.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if virtual != nil {
		r.wg.Go(func() { r.runVirtualTime(ctx, virtual, mq) })
	} else {
		r.wg.Go(func() { r.runTicks(ctx) })
	}
	for _, q := range durable.QueueNames() {
		for range cfg.Workers {
			r.wg.Go(func() {
				_ = engine.RunWorker(ctx, engine.WorkerConfig{Coordinator: coord, Receiver: r.Receiver, Queue: q, Wait: 50 * time.Millisecond, Visibility: cfg.Visibility, Logger: cfg.Logger})
			})
		}
	}
	return r, nil
}

// runTicks fires due timers every TickInterval until ctx ends.
func (r *Runtime) runTicks(ctx context.Context) {
	t := time.NewTicker(r.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := r.Coordinator.Tick(ctx, &engine.TickParams{}); err != nil && ctx.Err() == nil {
				r.cfg.Logger.LogAttrs(ctx, slog.LevelError, "tick failed", slog.String("error", err.Error()))
			}
		}
	}
}

// farAhead is beyond any timer: a wait and a saga's timeout are at most a year.
const farAhead = 2 * 365 * 24 * time.Hour

// runVirtualTime moves a manual clock on whenever nothing is in flight
// and nothing is visible: to the next delayed message, or the next timer,
// whichever comes first; then fires what is due.
func (r *Runtime) runVirtualTime(ctx context.Context, clock *durable.ManualClock, q *memqueue.Queue) {
	t := time.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.moving.Lock()
		r.moveOn(ctx, clock, q)
		r.moving.Unlock()
	}
}

// moveOn is one look of runVirtualTime, with deliveries held off.
func (r *Runtime) moveOn(ctx context.Context, clock *durable.ManualClock, q *memqueue.Queue) {
	// What waits on a sender, read before the timers and again after
	// them: a delivery or a new await between the reads must not let
	// time pass a receiving saga's timeout.
	hold, holding := r.receivingWake(ctx)
	inFlight, next := q.Pending()
	now := clock.Now()
	if inFlight > 0 || (!next.IsZero() && !next.After(now)) {
		return // work in hand, or visible: the workers take it
	}
	due, err := r.Store.SagaListDue(ctx, &durable.SagaListDueParams{Before: now.Add(farAhead), Limit: 1})
	if err == nil && len(due.Sagas) > 0 && (next.IsZero() || due.Sagas[0].WakeAt.Before(next)) {
		next = due.Sagas[0].WakeAt
	}
	if next.IsZero() {
		return // nothing waits
	}
	// A saga that waits on a sender holds time at its own timeout,
	// unless someone waits for a saga to end: timers before it fire;
	// what is due (the test moved the clock) fires.
	if next.After(now) {
		if h, ok := r.receivingWake(ctx); ok && (!holding || h.Before(hold)) {
			hold, holding = h, true
		}
		if (r.waiters.Load() > 0 || !holding || next.Before(hold)) && !r.waitedHeld(ctx) {
			clock.Advance(next.Sub(now))
		}
	}
	if _, err := r.Coordinator.Tick(ctx, &engine.TickParams{}); err != nil && ctx.Err() == nil {
		r.cfg.Logger.LogAttrs(ctx, slog.LevelError, "tick failed", slog.String("error", err.Error()))
	}
}

// Close stops the workers and waits for them.
func (r *Runtime) Close() {
	r.closed.Store(true)
	r.cancel()
	r.wg.Wait()
}

// Run starts a saga and waits until it is final (succeeded, compensated or
// compensation_failed) or held, or ctx ends.
func (r *Runtime) Run(ctx context.Context, p *engine.StartParams) (*saga.State, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	st, err := r.Coordinator.Start(ctx, p)
	if err != nil {
		return nil, err
	}
	return r.Wait(ctx, st.SagaID)
}

// Wait polls a saga until it is final or held (on_failure: hold: it
// waits for an operator), or ctx ends. On a manual clock,
// virtual time passes meanwhile, awaits' and callbacks' timeouts included.
// It returns once OnStep, if set, has heard every step of the saga.
func (r *Runtime) Wait(ctx context.Context, sagaID string) (*saga.State, error) {
	r.waiters.Add(1)
	defer r.waiters.Add(-1)
	r.waitFor(sagaID, 1)
	defer r.waitFor(sagaID, -1)
	return r.poll(ctx, sagaID, func(st *saga.State) bool {
		return (st.Status.Final() || st.Status == durable.StatusHeld) && !r.Coordinator.Unreported(sagaID)
	})
}

// WaitReceiving polls a saga until it waits on a signal (an await) or on a
// callback token, or is final or held, or ctx ends: then a test can send the
// signal or complete the token. On a manual clock, virtual time does not
// pass the await's or callback's timeout meanwhile.
func (r *Runtime) WaitReceiving(ctx context.Context, sagaID string) (*saga.State, error) {
	return r.poll(ctx, sagaID, func(st *saga.State) bool {
		return st.Status.Final() || st.Status == durable.StatusHeld || r.receiving(ctx, st)
	})
}

// receiving reports whether a saga waits on a signal or a callback token.
func (r *Runtime) receiving(ctx context.Context, st *saga.State) bool {
	cur, ok := st.Pending()
	if !ok || !cur.Wait || cur.Compensating || st.Status != durable.StatusWaiting {
		return false
	}
	plan, err := r.plans.Get(ctx, st.DefinitionHash)
	if err != nil || cur.Step < 0 || cur.Step >= len(plan.Steps()) {
		return false
	}
	s := plan.Steps()[cur.Step]
	return s.Kind == lang.KindAwait || s.Callback != nil
}

// receivingWake is the earliest timer (timeout) of the sagas that wait
// on a signal or a callback token, and whether any does (the memory
// store: virtual time only).
func (r *Runtime) receivingWake(ctx context.Context) (time.Time, bool) {
	var earliest time.Time
	p := &durable.SagaListParams{Status: durable.StatusWaiting, Limit: 1000}
	for {
		page, err := r.Coordinator.List(ctx, p)
		if err != nil {
			return earliest, !earliest.IsZero()
		}
		for _, sum := range page.Sagas {
			if st, err := r.Coordinator.Get(ctx, sum.SagaID); err == nil && r.receiving(ctx, st) {
				if w := st.WakeAt(); earliest.IsZero() || w.Before(earliest) {
					earliest = w
				}
			}
		}
		if page.NextCursor == "" {
			return earliest, !earliest.IsZero()
		}
		p.Cursor = page.NextCursor
	}
}

// SignalOption sets something of a signal beyond its saga, name and payload.
type SignalOption func(*engine.SignalParams)

// SignalID makes a signal idempotent: sent again with the same id, it is
// taken once (saga.ReceiptDuplicate).
func SignalID(id string) SignalOption {
	return func(p *engine.SignalParams) { p.ID = id }
}

// Signal sends the signal name to a saga with payload, as
// client.Client.Signal does (engine.Coordinator.Signal): applied when the
// saga awaits it, kept when it will; errors wrap durable.ErrNotFound,
// saga.ErrNotReceiving, saga.ErrKeptFull or saga.ErrBadDelivery.
func (r *Runtime) Signal(ctx context.Context, sagaID, name string, payload any, opts ...SignalOption) (*engine.Delivered, error) {
	p := &engine.SignalParams{SagaID: sagaID, Name: name, Payload: payload}
	for _, o := range opts {
		o(p)
	}
	if r.closed.Load() {
		return nil, ErrClosed
	}
	r.moving.RLock()
	defer r.moving.RUnlock()
	return r.Coordinator.Signal(ctx, p)
}

// SignalWithStart starts a saga unless it exists and signals it either
// way, as engine.Coordinator.SignalWithStart does, with virtual time held
// still meanwhile as for Signal.
func (r *Runtime) SignalWithStart(ctx context.Context, p *engine.SignalWithStartParams) (*engine.SignalWithStartResult, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	r.moving.RLock()
	defer r.moving.RUnlock()
	return r.Coordinator.SignalWithStart(ctx, p)
}

// CompleteCallback completes a callback token (saga.Call.CallbackToken)
// with the step's output, as client.Client.CompleteCallback does; errors
// wrap saga.ErrBadToken, saga.ErrTokenNotAwaited, saga.ErrNotReceiving,
// durable.ErrNotFound or saga.ErrBadDelivery.
func (r *Runtime) CompleteCallback(ctx context.Context, token string, output any) (*engine.Delivered, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	r.moving.RLock()
	defer r.moving.RUnlock()
	return r.Coordinator.CompleteCallback(ctx, token, output)
}

// FailCallback fails a callback token's attempt with an error type and a
// message, as client.Client.FailCallback does: the step retries with a new
// token, or fails.
func (r *Runtime) FailCallback(ctx context.Context, token, errorType, message string) (*engine.Delivered, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	r.moving.RLock()
	defer r.moving.RUnlock()
	return r.Coordinator.FailCallback(ctx, token, errorType, message)
}

// poll reads a saga until done says so or ctx ends.
func (r *Runtime) poll(ctx context.Context, sagaID string, done func(*saga.State) bool) (*saga.State, error) {
	t := time.NewTicker(r.cfg.PollInterval)
	defer t.Stop()
	for {
		st, err := r.Coordinator.Get(ctx, sagaID)
		if err != nil {
			return nil, err
		}
		if done(st) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("saga %s still %s: %w", sagaID, st.Status, ctx.Err())
		case <-t.C:
		}
	}
}

// waitFor counts one more (d = 1) or one fewer (d = -1) call in Wait
// waiting for saga id.
func (r *Runtime) waitFor(id string, d int) {
	r.waitedMu.Lock()
	defer r.waitedMu.Unlock()
	if r.waited == nil {
		r.waited = map[string]int{}
	}
	if r.waited[id] += d; r.waited[id] <= 0 {
		delete(r.waited, id)
	}
}

// waitedHeld reports whether a saga some call in Wait waits for is held:
// that call returns as soon as it polls, so virtual time must not pass
// the hold's end (hold_for, a timer the tick fires) before it does.
func (r *Runtime) waitedHeld(ctx context.Context) bool {
	r.waitedMu.Lock()
	ids := make([]string, 0, len(r.waited))
	for id := range r.waited {
		ids = append(ids, id)
	}
	r.waitedMu.Unlock()
	for _, id := range ids {
		if st, err := r.Coordinator.Get(ctx, id); err == nil && st.Status == durable.StatusHeld {
			return true
		}
	}
	return false
}
