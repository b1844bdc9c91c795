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

// The package's test rigs: coordinators on the memory store and queue,
// with a manual clock, behind wrappers that let a test fail, drop, watch
// or reorder any call.

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

// rig is a coordinator on the memory store and queue with a manual clock.
type rig struct {
	t      *testing.T
	store  *faultyStore
	queue  *faultyQueue
	q      *memqueue.Queue
	clock  *durable.ManualClock
	reg    *engine.Registry
	coord  *engine.Coordinator
	calls  sync.Map // idempotency key -> *atomic.Int64
	plan   *saga.Plan
	events []engine.StepEvent
	mu     sync.Mutex
}

// faultyStore and faultyQueue let a test step in before a call.
type faultyStore struct {
	durable.Store
	beforeUpdate func(p *durable.SagaUpdateParams)
}

func (s *faultyStore) SagaUpdate(ctx context.Context, p *durable.SagaUpdateParams) error {
	if f := s.beforeUpdate; f != nil {
		s.beforeUpdate = nil
		f(p)
	}
	return s.Store.SagaUpdate(ctx, p)
}

type faultyQueue struct {
	durable.Queue
	failSends atomic.Int64
	sent      atomic.Int64
}

func (q *faultyQueue) Send(ctx context.Context, msgs []durable.Message) error {
	if q.failSends.Load() > 0 {
		q.failSends.Add(-1)
		return errors.New("injected send failure")
	}
	q.sent.Add(int64(len(msgs)))
	return q.Queue.Send(ctx, msgs)
}

func newRig(t *testing.T, defFile string) *rig {
	r := &rig{t: t, clock: durable.NewManualClock(t0), reg: engine.NewRegistry()}
	r.q = memqueue.New(memqueue.Config{Clock: r.clock, MaxReceives: 3, Visibility: 10 * time.Second})
	r.store = &faultyStore{Store: memstore.New()}
	r.queue = &faultyQueue{Queue: r.q}
	r.plan = mustCompileFile(t, defFile)
	r.reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		n, _ := r.calls.LoadOrStore(c.IdempotencyKey, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		return map[string]any{"id": c.Step + "-1", "status": "captured"}, nil
	})
	var err error
	r.coord, err = engine.NewCoordinator(engine.CoordinatorConfig{
		Store: r.store, Queue: r.queue, Actions: r.reg, Clock: r.clock, Rand: func() float64 { return 0.5 },
		OnStep: func(ev engine.StepEvent) { r.mu.Lock(); r.events = append(r.events, ev); r.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) start(id string, input map[string]any) *saga.State {
	r.t.Helper()
	st, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: id, Input: input})
	if err != nil {
		r.t.Fatal(err)
	}
	return st
}

// receive takes the next message from either queue, moving the clock past delays.
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

// drain handles messages until none are left.
func (r *rig) drain() {
	r.t.Helper()
	for range 200 {
		d, ok := r.receive()
		if !ok {
			return
		}
		engine.HandleDelivery(context.Background(), r.coord, r.q, d, nil)
	}
	r.t.Fatal("queues did not drain")
}

func (r *rig) get(id string) *saga.State {
	r.t.Helper()
	st, err := r.coord.Get(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
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

// newTextRig is a rig on a definition given as text.
func newTextRig(t *testing.T, src string) *rig {
	t.Helper()
	p := filepath.Join(t.TempDir(), "saga.yaml")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return newRig(t, p)
}

// edgeRig runs sagas of an inline definition on the memory store and
// queue, with actions answered by act and every call remembered. Its
// tests pin the contract at its edges: an action that returned success
// is compensated if the saga compensates, whatever happens after it
// (checkCompensated).
type edgeRig struct {
	*rig
	mu    sync.Mutex
	log   []string // "step" or "step.compensate" for each call that returned success, by idempotency key order
	okKey map[string]bool
}

func newEdgeRig(t *testing.T, src string, act func(ctx context.Context, c saga.Call) (any, error)) *edgeRig {
	t.Helper()
	r := &rig{t: t, clock: durable.NewManualClock(t0), reg: engine.NewRegistry()}
	r.q = memqueue.New(memqueue.Config{Clock: r.clock, MaxReceives: 3, Visibility: 10 * time.Second})
	r.store = &faultyStore{Store: memstore.New()}
	r.queue = &faultyQueue{Queue: r.q}
	r.plan = mustCompile(t, src)
	e := &edgeRig{rig: r, okKey: map[string]bool{}}
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
			e.mu.Lock()
			e.log = append(e.log, name)
			e.okKey[c.IdempotencyKey] = true
			e.mu.Unlock()
		}
		return out, err
	})
	var err error
	r.coord, err = engine.NewCoordinator(engine.CoordinatorConfig{Store: r.store, Queue: r.queue, Actions: r.reg, Clock: r.clock, Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// succeeded lists the calls that returned success, in order.
func (e *edgeRig) succeeded() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.log, " ")
}

// ended fails unless saga id ended in status with a failure of failType at
// failStep, after exactly the successful calls given.
func (e *edgeRig) ended(t *testing.T, id string, status durable.Status, failType, failStep, calls string) {
	t.Helper()
	st := e.get(id)
	if st.Status != status {
		t.Fatalf("status %s, want %s (failure %v)", st.Status, status, st.Failure)
	}
	if st.Failure == nil || st.Failure.Type != failType || st.Failure.Step != failStep {
		t.Fatalf("failure %+v, want %s at %s", st.Failure, failType, failStep)
	}
	if got := e.succeeded(); got != calls {
		t.Fatalf("calls %q, want %q", got, calls)
	}
}

// checkCompensated fails unless every forward action that returned
// success had its compensation return success too.
func (e *edgeRig) checkCompensated(t *testing.T, compensable ...string) {
	t.Helper()
	calls := " " + e.succeeded() + " "
	for _, s := range compensable {
		if strings.Contains(calls, " "+s+" ") && !strings.Contains(calls, " "+s+".compensate ") {
			t.Errorf("%s returned success and was never compensated; calls: %s", s, strings.TrimSpace(calls))
		}
	}
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

// frig is the rig for forks: the memory store and queue behind
// wrappers that can fail or drop any call, a manual clock, and actions
// that log what they did. Messages are handled one at a time, as a worker
// does: deleted when handled, visible again after the visibility timeout
// otherwise, and moved to the dead-letter queue after three receives.
type frig struct {
	t     *testing.T
	clock *durable.ManualClock
	q     *memqueue.Queue
	store *fStore
	queue *fQueue
	coord *engine.Coordinator
	plan  *saga.Plan

	mu   sync.Mutex
	log  []string
	fail map[string]bool       // "action(arg)" fails for good
	outs map[string]func() any // "action(arg)" returns this instead of its input
	errs []error               // what Handle returned
	// tokens are the callback tokens the actions got, by step
	tokens map[string]string
	done   map[string]any // outputs by idempotency key
}

// fStore lets a test fail or watch any call: hook gets the call's name and
// its key (the saga id, or the fork key) and returns the error to give.
type fStore struct {
	durable.Store
	mu   sync.Mutex
	hook func(op, key string) error
}

func (s *fStore) check(op, key string) error {
	s.mu.Lock()
	h := s.hook
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	return h(op, key)
}

func (s *fStore) setHook(h func(op, key string) error) { s.mu.Lock(); s.hook = h; s.mu.Unlock() }

func (s *fStore) SagaCreate(ctx context.Context, p *durable.SagaCreateParams) error {
	if err := s.check("create", p.Record.SagaID); err != nil {
		return err
	}
	return s.Store.SagaCreate(ctx, p)
}

func (s *fStore) SagaGet(ctx context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	if err := s.check("get", p.SagaID); err != nil {
		return nil, err
	}
	return s.Store.SagaGet(ctx, p)
}

func (s *fStore) SagaUpdate(ctx context.Context, p *durable.SagaUpdateParams) error {
	if err := s.check("update", p.Record.SagaID); err != nil {
		return err
	}
	return s.Store.SagaUpdate(ctx, p)
}

func (s *fStore) ForkCount(ctx context.Context, p *durable.ForkCountParams) (*durable.ForkRecord, error) {
	if err := s.check("forkcount", p.Key); err != nil {
		return nil, err
	}
	return s.Store.ForkCount(ctx, p)
}

func (s *fStore) ForkGet(ctx context.Context, p *durable.ForkGetParams) (*durable.ForkRecord, error) {
	if err := s.check("forkget", p.Key); err != nil {
		return nil, err
	}
	return s.Store.ForkGet(ctx, p)
}

func (s *fStore) ForkFail(ctx context.Context, p *durable.ForkFailParams) (*durable.ForkRecord, error) {
	if err := s.check("forkfail", p.Key); err != nil {
		return nil, err
	}
	return s.Store.ForkFail(ctx, p)
}

func (s *fStore) ForkStop(ctx context.Context, p *durable.ForkStopParams) (*durable.ForkRecord, error) {
	if err := s.check("forkstop", p.Key); err != nil {
		return nil, err
	}
	return s.Store.ForkStop(ctx, p)
}

func (s *fStore) ForkCancelled(ctx context.Context, p *durable.ForkCancelledParams) error {
	if err := s.check("forkcancelled", p.Key); err != nil {
		return err
	}
	return s.Store.ForkCancelled(ctx, p)
}

// fQueue lets a test fail a send, or drop a message (as if it reached a
// dead-letter queue): hook returns drop, or an error for the whole send.
type fQueue struct {
	durable.Queue
	mu   sync.Mutex
	hook func(m durable.Message) (drop bool, err error)
	dup  bool // every fork message (ended, join, undo) is sent twice (at-least-once delivery)
}

func (q *fQueue) setHook(h func(m durable.Message) (bool, error)) {
	q.mu.Lock()
	q.hook = h
	q.mu.Unlock()
}

func (q *fQueue) Send(ctx context.Context, msgs []durable.Message) error {
	q.mu.Lock()
	h := q.hook
	q.mu.Unlock()
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
	q.mu.Lock()
	dup := q.dup
	q.mu.Unlock()
	if dup {
		for _, m := range keep {
			if m.Kind != "" {
				keep = append(keep, m)
			}
		}
	}
	return q.Queue.Send(ctx, keep)
}

var errInjected = errors.New("injected failure")

func newFrig(t *testing.T, src string, children map[string]string) *frig {
	t.Helper()
	r := &frig{t: t, clock: durable.NewManualClock(t0), fail: map[string]bool{}, outs: map[string]func() any{}, tokens: map[string]string{}, done: map[string]any{}}
	r.q = memqueue.New(memqueue.Config{Clock: r.clock, MaxReceives: 3, Visibility: 10 * time.Second})
	r.store = &fStore{Store: memstore.New()}
	r.queue = &fQueue{Queue: r.q}
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
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
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
	var err error
	r.coord, err = engine.NewCoordinator(engine.CoordinatorConfig{Store: r.store, Queue: r.queue, Actions: reg, Clock: r.clock, Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *frig) start(id string, input map[string]any) {
	r.t.Helper()
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: id, Input: input}); err != nil {
		r.t.Fatal(err)
	}
}

// step handles the next message of either queue, moving the clock past
// delays and visibility timeouts; false when none is left.
func (r *frig) step() bool {
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

// drain handles messages until none is left (or n were handled).
func (r *frig) drain() {
	r.t.Helper()
	for range 200000 {
		if !r.step() {
			return
		}
	}
	r.t.Fatal("the queues did not drain")
}

// drainUntil handles messages until done holds (checked after each).
func (r *frig) drainUntil(done func() bool) bool {
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

func (r *frig) get(id string) *saga.State {
	r.t.Helper()
	st, err := r.coord.Get(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return st
}

func (r *frig) effects() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

func (r *frig) handleErrors() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, e := range r.errs {
		s = append(s, e.Error())
	}
	return strings.Join(s, "\n")
}

// dead counts the messages in both dead-letter queues.
func (r *frig) dead() int {
	return r.q.Len(durable.DeadLetter(durable.QueueAdvance)) + r.q.Len(durable.DeadLetter(durable.QueueCompensate))
}

func (r *frig) sweep() {
	r.t.Helper()
	r.clock.Advance(30 * time.Minute)
	if _, err := r.coord.Sweep(context.Background(), &engine.SweepParams{IdleFor: 20 * time.Minute}); err != nil {
		r.t.Logf("sweep: %v", err)
	}
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

var errHandFault = errors.New("injected fault")

// handQueue keeps what is sent, in order; failSend, when it returns
// true for a batch, fails that send (nothing is queued).
type handQueue struct {
	msgs     []durable.Message
	failSend func([]durable.Message) bool
}

func (q *handQueue) Send(_ context.Context, msgs []durable.Message) error {
	if q.failSend != nil && q.failSend(msgs) {
		return errHandFault
	}
	q.msgs = append(q.msgs, msgs...)
	return nil
}

// handStore fails SagaCreate when failCreate says so.
type handStore struct {
	durable.Store
	failCreate func(id string) bool
}

func (s *handStore) SagaCreate(ctx context.Context, p *durable.SagaCreateParams) error {
	if s.failCreate != nil && s.failCreate(p.Record.SagaID) {
		return errHandFault
	}
	return s.Store.SagaCreate(ctx, p)
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

// handRig is a coordinator on the memory store whose queue the test
// delivers by hand: messages in the order the test picks, delays ignored
// (a message whose handling fails stays queued, as SQS redelivers it),
// with faults placed on one send or one create.
type handRig struct {
	t       *testing.T
	q       *handQueue
	store   *handStore
	actions *handActions
	coord   *engine.Coordinator
	clock   *durable.ManualClock
}

func newHandRig(t *testing.T) *handRig {
	r := &handRig{t: t, q: &handQueue{}, store: &handStore{Store: memstore.New()}, actions: &handActions{}, clock: durable.NewManualClock(t0)}
	c, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: r.store, Queue: r.q, Actions: r.actions, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	r.coord = c
	return r
}

// deliver handles the first queued message pick accepts; a message whose
// handling fails goes back to the end of the queue. It reports whether
// there was one, and the handler's error.
func (r *handRig) deliver(pick func(durable.Message) bool) (bool, error) {
	for i, m := range r.q.msgs {
		if !pick(m) {
			continue
		}
		r.q.msgs = append(r.q.msgs[:i:i], r.q.msgs[i+1:]...)
		_, err := r.coord.Handle(context.Background(), durable.AppendMessage(nil, m))
		if err != nil {
			r.q.msgs = append(r.q.msgs, m)
		}
		return true, err
	}
	return false, nil
}

// drain delivers every message, delays ignored, until none is left or
// the same ones keep failing.
func (r *handRig) drain() {
	for range 500 {
		if ok, _ := r.deliver(func(durable.Message) bool { return true }); !ok {
			return
		}
	}
}

func (r *handRig) get(id string) *saga.State {
	st, err := r.coord.Get(context.Background(), id)
	if err != nil {
		r.t.Fatalf("get %s: %v", id, err)
	}
	return st
}

func forSaga(id string) func(durable.Message) bool {
	return func(m durable.Message) bool { return m.SagaID == id }
}

// outActions answers each call with out's value, and notes the
// steps it was called for.
type outActions struct {
	out   func(saga.Call) any
	mu    *sync.Mutex
	steps *[]string
}

func (a outActions) Invoke(_ context.Context, c saga.Call) (any, error) {
	a.mu.Lock()
	*a.steps = append(*a.steps, c.Action)
	a.mu.Unlock()
	return a.out(c), nil
}

// runToTheEnd starts plan as saga p on a memory store, with handRig's
// hand-delivered queue, and delivers every message (a message whose
// handling fails goes back to the end, as SQS redelivers it) until none
// is left or 500 deliveries were made.
func runToTheEnd(t *testing.T, plan *saga.Plan, out func(saga.Call) any) (*outRig, []error) {
	t.Helper()
	r := &outRig{handRig: &handRig{t: t, q: &handQueue{}, store: &handStore{Store: memstore.New()}, clock: durable.NewManualClock(t0)}}
	c, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: r.store, Queue: r.q, Actions: outActions{out, &r.mu, &r.actions}, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	r.coord = c
	if _, err := c.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
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

type outRig struct {
	*handRig
	mu      sync.Mutex
	actions []string
}

// calls lists the actions called, in order.
func (r *outRig) calls() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.actions, " ")
}

// finalParent returns saga p, failing the test unless it is final.
func finalParent(t *testing.T, r *outRig, errs []error) *saga.State {
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
