package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// touchStore records the sagas read or written, and fails the reads and
// writes of the sagas broken names.
type touchStore struct {
	durable.Store
	mu      sync.Mutex
	touched []string
	ops     []string // "get id", "create id", "update id", "fork-get key"
	broken  func(id string) bool
}

func (s *touchStore) touch(op, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touched = append(s.touched, id)
	s.ops = append(s.ops, op+" "+id)
	if s.broken != nil && s.broken(id) {
		return durable.ErrThrottled
	}
	return nil
}

func (s *touchStore) SagaGet(ctx context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	if err := s.touch("get", p.SagaID); err != nil {
		return nil, err
	}
	return s.Store.SagaGet(ctx, p)
}

func (s *touchStore) SagaCreate(ctx context.Context, p *durable.SagaCreateParams) error {
	if err := s.touch("create", p.Record.SagaID); err != nil {
		return err
	}
	return s.Store.SagaCreate(ctx, p)
}

func (s *touchStore) SagaUpdate(ctx context.Context, p *durable.SagaUpdateParams) error {
	if err := s.touch("update", p.Record.SagaID); err != nil {
		return err
	}
	return s.Store.SagaUpdate(ctx, p)
}

func (s *touchStore) ForkGet(ctx context.Context, p *durable.ForkGetParams) (*durable.ForkRecord, error) {
	if err := s.touch("fork-get", p.Key); err != nil {
		return nil, err
	}
	return s.Store.ForkGet(ctx, p)
}

// newTouchRig is a hand rig on a touchStore.
func newTouchRig(t *testing.T) (*rig, *touchStore) {
	store := &touchStore{Store: memstore.New()}
	return newHandRigOn(t, store, engine.CoordinatorConfig{}), store
}

// A child that fails cancels its siblings; a sibling that waits on a
// fork of its own stops that fork. The stop is a message of the
// sibling's, not work done inside the failed child's ended message: one
// message reaches only its own fork's lanes, however deep the forks nest.
// Done inline, every delivery of the ended message would cancel the
// whole tree below it again (each cancel found done re-sends its outbox,
// whose stop cancels the next level, and so on), and fail if any one of
// those reads, writes or sends did: under the simulation's faults such
// a message crosses 30 to 300 faulty calls a delivery, fails every
// delivery and goes to the dead-letter queue (dead_letters_only_poison).
func TestForkStopOfANestedForkIsAMessageOfItsOwn(t *testing.T) {
	t.Parallel()
	r, store := newTouchRig(t)
	q, actions, coord := r.hand, r.actions, r.coord
	plan := mustCompile(t, `
saga: nested
steps:
  - id: outer
    parallel:
      - steps: [{id: bad, action: svc.bad}]
      - steps:
          - {id: a, action: svc.a, compensate: {action: svc.a_undo}}
          - id: inner
            parallel:
              - steps: [{id: x, action: svc.x, compensate: {action: svc.x_undo}}]
              - steps: [{id: y, action: svc.y, compensate: {action: svc.y_undo}}]
`)
	actions.fail = func(c saga.Call) bool { return c.Step == "bad" }
	ctx := context.Background()
	if _, err := coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	const bad, waiting = "p.outer.1.0", "p.outer.1.1"
	r.deliver(forSaga("p"))     // the fork launches both branches
	r.deliver(forSaga(waiting)) // a runs; the inner fork launches x and y
	if st := r.get(waiting); st.Status != durable.StatusWaiting {
		t.Fatalf("branch 1 after a: %s, want waiting on its inner fork", st.Status)
	}
	r.deliver(forSaga(bad)) // bad fails: the branch ends compensated
	if st := r.get(bad); st.Status != durable.StatusCompensated {
		t.Fatalf("branch 0 after bad: %s, want compensated", st.Status)
	}
	grandchild := func(id string) bool { return strings.HasPrefix(id, waiting+".") }
	store.broken = grandchild // throttled for as long as it lasts
	store.touched = nil
	ended := func(m durable.Message) bool { return m.Kind == durable.KindEnded && m.SagaID == bad }
	if ok, err := r.deliver(ended); !ok || err != nil {
		t.Fatalf("branch 0's ended message, its siblings' grandchildren unreachable: %v (handled: %v)", err, ok)
	}
	for _, id := range store.touched {
		if grandchild(id) {
			t.Fatalf("branch 0's ended message reached %s, a child of its sibling's fork (touched %v)", id, store.touched)
		}
	}
	if st := r.get(waiting); !st.CancelRequested {
		t.Errorf("branch 1 was not cancelled by its sibling's failure")
	}
	store.broken = nil
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("parent: %s at version %d with %d messages queued, want compensated", st.Status, st.Version, len(q.msgs))
	}
	for _, step := range []string{"a", "x", "y"} {
		ran, undone := 0, 0
		for _, c := range actions.calls {
			if strings.HasSuffix(c, "/"+step) {
				ran++
			}
			if strings.HasSuffix(c, "/"+step+".compensate") {
				undone++
			}
		}
		if ran > 0 && undone == 0 {
			t.Errorf("%s ran and was never undone: calls %v", step, actions.calls)
		}
	}
}

// The message that made a fork, delivered again, sends the fork's outbox
// again (rule 3): each child is read, found, and left to go on, even
// after the fork failed, when the failed child's count has cancelled the
// others (their cancels are its work). A launch that tried a create and
// read the fork record first for every child, and cancelled again every
// child it found running, re-sending each one's outbox, made a re-send
// of a fork of C children some 5 C requests, every one of which had to
// pass for the message to: in the simulation (seeds 4, 5, 6, 8 and 16,
// 1,000 sagas) such messages failed all 20 deliveries, and went to the
// dead-letter queue.
func TestForkOutboxSentAgainReadsItsChildrenOnly(t *testing.T) {
	t.Parallel()
	r, store := newTouchRig(t)
	plan := mustCompile(t, `
saga: resent
steps:
  - id: first
    action: svc.first
  - id: both
    parallel:
      - steps: [{id: bad, action: svc.bad}]
      - steps: [{id: slow, action: svc.slow}]
      - steps: [{id: late, action: svc.late}]
`)
	r.actions.fail = func(c saga.Call) bool { return c.Step == "bad" }
	ctx := context.Background()
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "p"}); err != nil {
		t.Fatal(err)
	}
	first := durable.AppendMessage(nil, r.hand.msgs[0])
	r.deliver(forSaga("p")) // first runs; the fork launches the three branches
	for _, id := range []string{"p.both.2.0", "p.both.2.1", "p.both.2.2"} {
		if st := r.get(id); st.Status != durable.StatusRunning {
			t.Fatalf("branch %s: %s, want running", id, st.Status)
		}
	}
	resend := func(when string, wantSent int) {
		t.Helper()
		store.ops = nil
		sent := len(r.hand.msgs)
		if outcome, err := r.coord.Handle(ctx, first); err != nil || outcome != engine.HandledResent {
			t.Fatalf("%s: the fork's message again: %q, %v; want resent", when, outcome, err)
		}
		want := []string{"get p", "get p.both.2.0", "get p.both.2.1", "get p.both.2.2"}
		if got := store.ops; strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("%s: the fork's outbox sent again did %v, want %v", when, got, want)
		}
		if n := len(r.hand.msgs) - sent; n != wantSent {
			t.Errorf("%s: the fork's outbox sent again queued %d messages, want %d: %v", when, n, wantSent, r.hand.msgs[sent:])
		}
	}
	// Each child still at its first version: its first message again (its
	// launcher may have died before it sent it).
	resend("while the children wait for their first message", 3)
	r.deliver(forSaga("p.both.2.0")) // bad fails: its branch ends compensated
	if ok, err := r.deliver(func(m durable.Message) bool { return m.Kind == durable.KindEnded }); !ok || err != nil {
		t.Fatalf("bad's ended message: %v", err)
	}
	for _, id := range []string{"p.both.2.1", "p.both.2.2"} {
		if st := r.get(id); !st.CancelRequested {
			t.Fatalf("branch %s not cancelled by bad's failure", id)
		}
	}
	resend("after the fork failed", 0)
	r.drain()
	if st := r.get("p"); st.Status != durable.StatusCompensated {
		t.Fatalf("parent: %s, want compensated", st.Status)
	}
}
