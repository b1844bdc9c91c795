package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

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
