package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

var (
	mustCompile     = sagatest.MustCompile
	mustCompileOpts = sagatest.MustCompileWith
	mustCompileFile = sagatest.MustCompileFile
	decodeInput     = sagatest.DecodeInput
	orderIn         = sagatest.OrderInput
)

func join(xs []string) string { return strings.Join(xs, " ") }

func equalValues(a, b any) bool { return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b) }

var osReadFile = os.ReadFile

// rig is the package's test rig: a coordinator on the memory store with a
// manual clock, behind a store and a queue that let a test fail, drop,
// watch or reorder any call. Its constructors differ in the saga it runs,
// the actions that answer it, and how its messages are delivered:
//
//   - newRig, newTextRig: a definition file (or text); actions that count
//     their calls by idempotency key; delivered as a worker takes them.
//   - newEdgeRig: actions the test gives, each success remembered;
//     delivered as a worker takes them.
//   - newForkRig: actions that log their effects as "action(arg)" and
//     honour idempotency keys; each message handled and deleted, its
//     failures noted.
//   - newHandRig (and newTreeRig, newTouchRig, runToTheEnd built on it):
//     actions that log "saga/step"; delivered in the order the test picks.
//
// The benchmark's handlePass (coordinator_bench_test.go) is not built on
// the rig: it measures the coordinator alone, whose allocations it pins,
// and the rig's hooks would count in its time.
type rig struct {
	t     *testing.T
	by    delivery
	clock *durable.ManualClock
	store *rigStore
	queue *rigQueue
	q     *memqueue.Queue // under queue, unless delivered by hand
	hand  *handQueue      // under queue when delivered by hand
	coord *engine.Coordinator
	plan  *saga.Plan

	reg     *engine.Registry // the actions, but for the hand rig's
	actions *handActions     // the hand rig's actions

	mu     sync.Mutex
	events []engine.StepEvent // newRig's: what OnStep reported

	// newRig's actions: calls per idempotency key (*atomic.Int64).
	calls sync.Map

	// newEdgeRig's actions: "step" or "step.compensate" for each call
	// that returned success, in order, and their keys.
	ok    []string
	okKey map[string]bool

	// newForkRig's actions and handling.
	log    []string              // effects, as "action(arg)"
	fail   map[string]bool       // "action(arg)" fails for good
	outs   map[string]func() any // "action(arg)" (or "action") returns this instead of its input
	tokens map[string]string     // the callback tokens the actions got, by step
	done   map[string]any        // outputs by idempotency key
	errs   []error               // what Handle returned

	// runToTheEnd's actions: the actions called, in order.
	invoked []string
	cfg     engine.CoordinatorConfig // the coordinator's, as connect made it
}

// delivery is how a rig's messages reach its coordinator.
type delivery int

const (
	// byWorker takes messages from the memory queue as a worker does
	// (HandleDelivery), moving the clock past delays of up to 100 s.
	byWorker delivery = iota
	// byHandler takes messages from the memory queue one at a time and
	// hands each to Coordinator.Handle: deleted when handled, visible
	// again after the visibility timeout otherwise (its error noted), and
	// moved to the dead-letter queue after three receives.
	byHandler
	// byHand delivers the messages in the order the test picks (deliver),
	// delays ignored; one whose handling fails stays queued, as SQS
	// redelivers it.
	byHand
)

// newBareRig builds the rig's clock, store and queue: the store is the
// memory store, or inner when given.
func newBareRig(t *testing.T, by delivery, inner durable.Store) *rig {
	r := &rig{t: t, by: by, clock: durable.NewManualClock(t0), reg: engine.NewRegistry()}
	if inner == nil {
		inner = memstore.New()
	}
	r.store = &rigStore{Store: inner}
	if by == byHand {
		r.hand = &handQueue{}
		r.queue = &rigQueue{Queue: r.hand}
	} else {
		r.q = memqueue.New(memqueue.Config{Clock: r.clock, MaxReceives: 3, Visibility: 10 * time.Second})
		r.queue = &rigQueue{Queue: r.q}
	}
	return r
}

// connect builds the coordinator of cfg on the rig's store, queue and
// clock; its actions are the rig's registry unless cfg names others.
func (r *rig) connect(cfg engine.CoordinatorConfig) *rig {
	r.t.Helper()
	cfg.Store, cfg.Queue, cfg.Clock = r.store, r.queue, r.clock
	if r.by == byHand && cfg.ChainSteps == 0 {
		// The test delivers each step's message: every step has one.
		cfg.ChainSteps = -1
	}
	if cfg.Actions == nil {
		cfg.Actions = r.reg
	}
	c, err := engine.NewCoordinator(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.coord, r.cfg = c, cfg
	return r
}

// stepByStep makes the rig's coordinator again with every step in a
// message of its own (no chains): for tests of what one message does.
func (r *rig) stepByStep() *rig {
	cfg := r.cfg
	cfg.ChainSteps = -1
	return r.connect(cfg)
}

// newRig runs the definition in defFile; its actions answer
// {"id": "<step>-1", "status": "captured"} and count their calls.
func newRig(t *testing.T, defFile string) *rig { return newRigChaining(t, defFile, 0) }

// newStepRig is newRig with every step in a message of its own (no
// chains): for tests of what one message does.
func newStepRig(t *testing.T, defFile string) *rig { return newRigChaining(t, defFile, -1) }

func newRigChaining(t *testing.T, defFile string, chainSteps int) *rig {
	r := newBareRig(t, byWorker, nil)
	r.plan = mustCompileFile(t, defFile)
	r.reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		n, _ := r.calls.LoadOrStore(c.IdempotencyKey, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		return map[string]any{"id": c.Step + "-1", "status": "captured"}, nil
	})
	return r.connect(engine.CoordinatorConfig{
		Rand:       func() float64 { return 0.5 },
		OnStep:     func(ev engine.StepEvent) { r.mu.Lock(); r.events = append(r.events, ev); r.mu.Unlock() },
		ChainSteps: chainSteps,
	})
}

// newTextRig is newRig on a definition given as text.
func newTextRig(t *testing.T, src string) *rig {
	t.Helper()
	p := filepath.Join(t.TempDir(), "saga.yaml")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return newRig(t, p)
}

// newEdgeRig runs sagas of an inline definition, with actions answered
// by act ({"id": "<step>-1"} when act is nil) and every success
// remembered. Its tests pin the contract at its edges: an action that
// returned success is compensated if the saga compensates, whatever
// happens after it (checkCompensated).
func newEdgeRig(t *testing.T, src string, act func(ctx context.Context, c saga.Call) (any, error)) *rig {
	t.Helper()
	r := newBareRig(t, byWorker, nil)
	r.plan = mustCompile(t, src)
	r.okKey = map[string]bool{}
	r.reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		var out any = map[string]any{"id": c.Step + "-1"}
		var err error
		if act != nil {
			out, err = act(ctx, c)
		}
		if err == nil {
			name := c.Step
			if c.Compensation {
				name += ".compensate"
			}
			r.mu.Lock()
			r.ok = append(r.ok, name)
			r.okKey[c.IdempotencyKey] = true
			r.mu.Unlock()
		}
		return out, err
	})
	return r.connect(engine.CoordinatorConfig{Rand: func() float64 { return 0.5 }})
}

// newForkRig runs the definition src, with its child sagas' files
// when children is not nil. Its actions log their effects (effects) as
// "action(arg)", arg the input's field of that name; they honour
// idempotency keys as a service does, fail for good as fail says, and
// answer their input, or what outs gives.
func newForkRig(t *testing.T, src string, children map[string]string) *rig {
	t.Helper()
	r := newBareRig(t, byHandler, nil)
	r.fail, r.outs, r.tokens, r.done = map[string]bool{}, map[string]func() any{}, map[string]string{}, map[string]any{}
	if children == nil {
		r.plan = mustCompile(t, src)
	} else {
		fsys := fstest.MapFS{"main.yaml": &fstest.MapFile{Data: []byte(src)}}
		for name, s := range children {
			fsys[name] = &fstest.MapFile{Data: []byte(s)}
		}
		p, err := saga.CompileFile(fsys, "main.yaml", saga.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r.plan = p
	}
	r.reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		name := c.Action
		if m, ok := c.Input.(map[string]any); ok {
			if arg, ok := m["arg"]; ok {
				name += fmt.Sprintf("(%v)", arg)
			}
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if out, ok := r.done[c.IdempotencyKey]; ok {
			return out, nil // a service that honours the key applies the effect once
		}
		if c.CallbackToken != "" {
			r.tokens[c.Step] = c.CallbackToken
		}
		if r.fail[name] {
			return nil, saga.Permanent(errors.New(name + " refused"))
		}
		r.log = append(r.log, name)
		var out any = c.Input
		if f := r.outs[name]; f != nil {
			out = f()
		} else if f := r.outs[c.Action]; f != nil {
			out = f()
		}
		r.done[c.IdempotencyKey] = out
		return out, nil
	})
	return r.connect(engine.CoordinatorConfig{Rand: func() float64 { return 0.5 }})
}

// newHandRig is a coordinator whose messages the test delivers by hand,
// with handActions for actions.
func newHandRig(t *testing.T) *rig {
	return newHandRigOn(t, nil, engine.CoordinatorConfig{})
}

// newHandRigOn is newHandRig on the store inner (the memory store when
// nil), with the coordinator's other settings from cfg.
func newHandRigOn(t *testing.T, inner durable.Store, cfg engine.CoordinatorConfig) *rig {
	r := newBareRig(t, byHand, inner)
	r.actions = &handActions{}
	if cfg.Actions == nil {
		cfg.Actions = r.actions
	}
	return r.connect(cfg)
}

func (r *rig) start(id string, input map[string]any) *saga.State {
	r.t.Helper()
	st, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: id, Input: input})
	if err != nil {
		r.t.Fatal(err)
	}
	return st
}

func (r *rig) get(id string) *saga.State {
	r.t.Helper()
	st, err := r.coord.Get(context.Background(), id)
	if err != nil {
		r.t.Fatalf("get %s: %v", id, err)
	}
	return st
}

// drain delivers messages until none is left, as the rig delivers them:
// by a worker, until the queues are empty or hold only messages due more
// than 100 s ahead (failing the test after 200); by the handler, until
// none is left at all (failing the test after 200,000); by hand, until
// none is left or the same ones keep failing (after 500).
func (r *rig) drain() {
	r.t.Helper()
	switch r.by {
	case byWorker:
		for range 200 {
			d, ok := r.receive()
			if !ok {
				return
			}
			engine.HandleDelivery(context.Background(), r.coord, r.q, d, nil)
		}
		r.t.Fatal("queues did not drain")
	case byHandler:
		for range 200000 {
			if !r.step() {
				return
			}
		}
		r.t.Fatal("the queues did not drain")
	case byHand:
		for range 500 {
			if ok, _ := r.deliver(func(durable.Message) bool { return true }); !ok {
				return
			}
		}
	}
}

// receive takes the next message from either memory queue, moving the
// clock past delays of up to 100 s.
func (r *rig) receive() (durable.Delivery, bool) {
	r.t.Helper()
	for range 100 {
		for _, q := range durable.QueueNames() {
			ds, err := r.q.Receive(context.Background(), &durable.ReceiveParams{Queue: q, Max: 1})
			if err != nil {
				r.t.Fatal(err)
			}
			if len(ds) == 1 {
				return ds[0], true
			}
		}
		if r.q.Len(durable.QueueAdvance)+r.q.Len(durable.QueueCompensate) == 0 {
			return durable.Delivery{}, false
		}
		r.clock.Advance(time.Second)
	}
	return durable.Delivery{}, false
}

// step handles the next message of either memory queue with
// Coordinator.Handle, moving the clock past delays and visibility
// timeouts; false when none is left.
func (r *rig) step() bool {
	r.t.Helper()
	ctx := context.Background()
	for range 2000 {
		for _, qn := range durable.QueueNames() {
			ds, err := r.q.Receive(ctx, &durable.ReceiveParams{Queue: qn, Max: 1})
			if err != nil {
				r.t.Fatal(err)
			}
			if len(ds) == 1 {
				d := ds[0]
				if _, err := r.coord.Handle(ctx, d.Body); err != nil {
					r.mu.Lock()
					r.errs = append(r.errs, err)
					r.mu.Unlock()
					return true // visible again after its visibility timeout
				}
				if err := r.q.Delete(ctx, &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle}); err != nil {
					r.t.Fatal(err)
				}
				return true
			}
		}
		if r.q.Len(durable.QueueAdvance)+r.q.Len(durable.QueueCompensate) == 0 {
			return false
		}
		r.clock.Advance(time.Second)
	}
	return false
}

// drainUntil steps until done holds (checked after each message).
func (r *rig) drainUntil(done func() bool) bool {
	r.t.Helper()
	for range 200000 {
		if done() {
			return true
		}
		if !r.step() {
			return done()
		}
	}
	return false
}

// deliver handles the first queued message pick accepts; a message whose
// handling fails goes back to the end of the queue. It reports whether
// there was one, and the handler's error.
func (r *rig) deliver(pick func(durable.Message) bool) (bool, error) {
	for i, m := range r.hand.msgs {
		if !pick(m) {
			continue
		}
		r.hand.msgs = append(r.hand.msgs[:i:i], r.hand.msgs[i+1:]...)
		_, err := r.coord.Handle(context.Background(), durable.AppendMessage(nil, m))
		if err != nil {
			r.hand.msgs = append(r.hand.msgs, m)
		}
		return true, err
	}
	return false, nil
}

func forSaga(id string) func(durable.Message) bool {
	return func(m durable.Message) bool { return m.SagaID == id }
}

// dead counts the messages in both dead-letter queues.
func (r *rig) dead() int {
	return r.q.Len(durable.DeadLetter(durable.QueueAdvance)) + r.q.Len(durable.DeadLetter(durable.QueueCompensate))
}

// sweep runs the sweep half an hour on, for sagas idle for 20 minutes.
func (r *rig) sweep() {
	r.t.Helper()
	r.clock.Advance(30 * time.Minute)
	if _, err := r.coord.Sweep(context.Background(), &engine.SweepParams{IdleFor: 20 * time.Minute}); err != nil {
		r.t.Logf("sweep: %v", err)
	}
}

// effects lists newForkRig's effects, in order.
func (r *rig) effects() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

// handleErrors lists the errors Handle returned, one a line.
func (r *rig) handleErrors() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, e := range r.errs {
		s = append(s, e.Error())
	}
	return strings.Join(s, "\n")
}

// succeeded lists newEdgeRig's calls that returned success, in order.
func (r *rig) succeeded() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.ok, " ")
}

// ended fails unless saga id ended in status with a failure of failType at
// failStep, after exactly the successful calls given.
func (r *rig) ended(t *testing.T, id string, status durable.Status, failType, failStep, calls string) {
	t.Helper()
	st := r.get(id)
	if st.Status != status {
		t.Fatalf("status %s, want %s (failure %v)", st.Status, status, st.Failure)
	}
	if st.Failure == nil || st.Failure.Type != failType || st.Failure.Step != failStep {
		t.Fatalf("failure %+v, want %s at %s", st.Failure, failType, failStep)
	}
	if got := r.succeeded(); got != calls {
		t.Fatalf("calls %q, want %q", got, calls)
	}
}

// checkCompensated fails unless every forward action that returned
// success had its compensation return success too.
func (r *rig) checkCompensated(t *testing.T, compensable ...string) {
	t.Helper()
	calls := " " + r.succeeded() + " "
	for _, s := range compensable {
		if strings.Contains(calls, " "+s+" ") && !strings.Contains(calls, " "+s+".compensate ") {
			t.Errorf("%s returned success and was never compensated; calls: %s", s, strings.TrimSpace(calls))
		}
	}
}

// rigStore lets a test step in before a call: beforeUpdate runs once,
// before the next SagaUpdate; hook gets each call's name and its key
// (the saga id, or the fork key) and returns the error to give.
type rigStore struct {
	durable.Store
	beforeUpdate func(p *durable.SagaUpdateParams)
	mu           sync.Mutex
	hook         func(op, key string) error
}

func (s *rigStore) check(op, key string) error {
	s.mu.Lock()
	h := s.hook
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	return h(op, key)
}

func (s *rigStore) setHook(h func(op, key string) error) { s.mu.Lock(); s.hook = h; s.mu.Unlock() }

func (s *rigStore) SagaCreate(ctx context.Context, p *durable.SagaCreateParams) error {
	if err := s.check("create", p.Record.SagaID); err != nil {
		return err
	}
	return s.Store.SagaCreate(ctx, p)
}

func (s *rigStore) SagaGet(ctx context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	if err := s.check("get", p.SagaID); err != nil {
		return nil, err
	}
	return s.Store.SagaGet(ctx, p)
}

func (s *rigStore) SagaUpdate(ctx context.Context, p *durable.SagaUpdateParams) error {
	if f := s.beforeUpdate; f != nil {
		s.beforeUpdate = nil
		f(p)
	}
	if err := s.check("update", p.Record.SagaID); err != nil {
		return err
	}
	return s.Store.SagaUpdate(ctx, p)
}

func (s *rigStore) DefinitionCurrent(ctx context.Context, p *durable.DefinitionCurrentParams) (*durable.DefinitionRecord, error) {
	if err := s.check("current", p.Name); err != nil {
		return nil, err
	}
	return s.Store.DefinitionCurrent(ctx, p)
}

func (s *rigStore) ForkCount(ctx context.Context, p *durable.ForkCountParams) (*durable.ForkRecord, error) {
	if err := s.check("forkcount", p.Key); err != nil {
		return nil, err
	}
	return s.Store.ForkCount(ctx, p)
}

func (s *rigStore) ForkGet(ctx context.Context, p *durable.ForkGetParams) (*durable.ForkRecord, error) {
	if err := s.check("forkget", p.Key); err != nil {
		return nil, err
	}
	return s.Store.ForkGet(ctx, p)
}

func (s *rigStore) ForkFail(ctx context.Context, p *durable.ForkFailParams) (*durable.ForkRecord, error) {
	if err := s.check("forkfail", p.Key); err != nil {
		return nil, err
	}
	return s.Store.ForkFail(ctx, p)
}

func (s *rigStore) ForkStop(ctx context.Context, p *durable.ForkStopParams) (*durable.ForkRecord, error) {
	if err := s.check("forkstop", p.Key); err != nil {
		return nil, err
	}
	return s.Store.ForkStop(ctx, p)
}

func (s *rigStore) ForkCancelled(ctx context.Context, p *durable.ForkCancelledParams) error {
	if err := s.check("forkcancelled", p.Key); err != nil {
		return err
	}
	return s.Store.ForkCancelled(ctx, p)
}

// rigQueue lets a test fail sends or drop messages: failSends fails that
// many sends; hook returns drop for a message (as if it reached a
// dead-letter queue), or an error for the whole send; with dup, every
// fork message (ended, join, undo) is sent twice (at-least-once
// delivery). sent counts the messages sent.
type rigQueue struct {
	durable.Queue
	failSends atomic.Int64
	sent      atomic.Int64
	mu        sync.Mutex
	hook      func(m durable.Message) (drop bool, err error)
	dup       bool
}

func (q *rigQueue) setHook(h func(m durable.Message) (bool, error)) {
	q.mu.Lock()
	q.hook = h
	q.mu.Unlock()
}

func (q *rigQueue) Send(ctx context.Context, msgs []durable.Message) error {
	if q.failSends.Load() > 0 {
		q.failSends.Add(-1)
		return errors.New("injected send failure")
	}
	q.mu.Lock()
	h, dup := q.hook, q.dup
	q.mu.Unlock()
	if h != nil || dup {
		var keep []durable.Message
		for _, m := range msgs {
			if h != nil {
				drop, err := h(m)
				if err != nil {
					return err
				}
				if drop {
					continue
				}
			}
			keep = append(keep, m)
		}
		if len(keep) == 0 {
			return nil
		}
		if dup {
			for _, m := range keep {
				if m.Kind != "" {
					keep = append(keep, m)
				}
			}
		}
		msgs = keep
	}
	q.sent.Add(int64(len(msgs)))
	return q.Queue.Send(ctx, msgs)
}

var (
	errInjected  = errors.New("injected failure")
	errHandFault = errors.New("injected fault")
)

// handQueue keeps what is sent, in order, for the test to deliver.
type handQueue struct {
	msgs []durable.Message
}

func (q *handQueue) Send(_ context.Context, msgs []durable.Message) error {
	q.msgs = append(q.msgs, msgs...)
	return nil
}

// handActions runs actions: fail says which calls fail for good; calls
// logs every call as saga/step(.compensate).
type handActions struct {
	fail  func(saga.Call) bool
	calls []string
}

func (a *handActions) Invoke(_ context.Context, c saga.Call) (any, error) {
	name := c.SagaID + "/" + c.Step
	if c.Compensation {
		name += ".compensate"
	}
	a.calls = append(a.calls, name)
	if a.fail != nil && a.fail(c) {
		return nil, saga.Permanent(saga.NewError("Rejected", c.Action+" rejected"))
	}
	return map[string]any{"id": c.IdempotencyKey}, nil
}

func (a *handActions) called(prefix string) []string {
	var out []string
	for _, c := range a.calls {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// outActions answers each call with out's value, and notes the
// action it was called for.
type outActions struct {
	out func(saga.Call) any
	r   *rig
}

func (a outActions) Invoke(_ context.Context, c saga.Call) (any, error) {
	a.r.mu.Lock()
	a.r.invoked = append(a.r.invoked, c.Action)
	a.r.mu.Unlock()
	return a.out(c), nil
}

// runToTheEnd starts plan as saga p on a hand rig whose actions answer
// out's value, and delivers every message (a message whose handling
// fails goes back to the end, as SQS redelivers it) until none is left
// or 500 deliveries were made; it returns the handler's errors.
func runToTheEnd(t *testing.T, plan *saga.Plan, out func(saga.Call) any) (*rig, []error) {
	t.Helper()
	r := newBareRig(t, byHand, nil)
	r.connect(engine.CoordinatorConfig{Actions: outActions{out, r}})
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	var errs []error
	for range 500 {
		ok, err := r.deliver(func(durable.Message) bool { return true })
		if !ok {
			break
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return r, errs
}

// invokedActions lists runToTheEnd's actions called, in order.
func (r *rig) invokedActions() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.invoked, " ")
}

// finalParent returns saga p, failing the test unless it is final.
func finalParent(t *testing.T, r *rig, errs []error) *saga.State {
	t.Helper()
	st := r.get("p")
	if !st.Status.Final() {
		var first error
		if len(errs) > 0 {
			first = errs[0]
		}
		t.Fatalf("the parent is %s after every message was delivered (%d handlings failed, the first: %v), want it final", st.Status, len(errs), first)
	}
	return st
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := osReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func countOf(log []string, s string) int {
	n := 0
	for _, l := range log {
		if l == s {
			n++
		}
	}
	return n
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d more)", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}

// bigOutputSaga is the edge rig's usual saga: three compensable actions
// around a set that grows the state by three copies of input.blob.
const bigOutputSaga = `
saga: big
input: {blob: string}
steps:
  - id: reserve
    action: inv.reserve
    out: reservation
    compensate: {action: inv.release, with: {id: "${vars.reservation.id}"}}
  - id: charge
    action: pay.charge
    out: payment
    compensate: {action: pay.refund}
  - id: grow
    set: {copy: "${input.blob + input.blob + input.blob}"}
  - id: ship
    action: ship.send
    out: shipment
    compensate: {action: ship.cancel}
`
