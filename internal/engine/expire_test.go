package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// treeStore records every saga created and every fork record written:
// the items of a tree, found apart from the walk that expires them.
type treeStore struct {
	*memstore.Store
	mu     sync.Mutex
	sagas  []string
	forks  []string
	marked map[string]bool // the sagas SagaExpire was called for, found or not
	// failMark, when set, fails the SagaExpire calls it says, as a crash
	// or a throttle cutting off a walk would.
	failMark func(id string) bool
}

func (s *treeStore) SagaExpire(ctx context.Context, p *durable.SagaExpireParams) error {
	s.mu.Lock()
	if s.marked == nil {
		s.marked = map[string]bool{}
	}
	s.marked[p.SagaID] = true
	fail := s.failMark != nil && s.failMark(p.SagaID)
	s.mu.Unlock()
	if fail {
		return errHandFault
	}
	return s.Store.SagaExpire(ctx, p)
}

func (s *treeStore) SagaCreate(ctx context.Context, p *durable.SagaCreateParams) error {
	err := s.Store.SagaCreate(ctx, p)
	if err == nil {
		s.mu.Lock()
		s.sagas = append(s.sagas, p.Record.SagaID)
		s.mu.Unlock()
	}
	return err
}

func (s *treeStore) fork(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.forks, key) {
		s.forks = append(s.forks, key)
	}
}

func (s *treeStore) ForkCount(ctx context.Context, p *durable.ForkCountParams) (*durable.ForkRecord, error) {
	s.fork(p.Key)
	return s.Store.ForkCount(ctx, p)
}

func (s *treeStore) ForkStop(ctx context.Context, p *durable.ForkStopParams) (*durable.ForkRecord, error) {
	s.fork(p.Key)
	return s.Store.ForkStop(ctx, p)
}

func (s *treeStore) ForkFail(ctx context.Context, p *durable.ForkFailParams) (*durable.ForkRecord, error) {
	s.fork(p.Key)
	return s.Store.ForkFail(ctx, p)
}

// newTreeRig is a hand rig on a treeStore whose expire walks mark at most
// batch items per message.
func newTreeRig(t *testing.T, batch int) (*rig, *treeStore) {
	ts := &treeStore{Store: memstore.New()}
	return newHandRigOn(t, ts, engine.CoordinatorConfig{ExpireBatch: batch}), ts
}

// treeDefinition forks twice: a foreach of five at two at a time, whose
// body forks again (a parallel of two), then a parallel at the top.
const treeDefinition = `
saga: tree
input: {skus: list}
steps:
  - id: hold
    action: svc.hold
    compensate: {action: svc.release}
  - id: each
    foreach: "${input.skus}"
    as: sku
    concurrency: 2
    steps:
      - id: pick
        action: svc.pick
        compensate: {action: svc.unpick}
      - id: both
        parallel:
          - steps: [{id: left, action: svc.left, compensate: {action: svc.left_undo}}]
          - steps: [{id: right, action: svc.right, compensate: {action: svc.right_undo}}]
  - id: tail
    parallel:
      - steps: [{id: a, action: svc.a}]
      - steps: [{id: b, action: svc.b}]
  - id: last
    action: svc.last
`

func runTree(t *testing.T, r *rig, id string) *saga.State {
	t.Helper()
	plan := mustCompile(t, treeDefinition)
	in := map[string]any{"skus": []any{"a", "b", "c", "d", "e"}}
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: id, Input: in}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	return r.get(id)
}

// marked fails unless every saga of the tree but its root, and every fork
// record, is marked to expire on the root's end (want: true), or none is
// (want: false).
func marked(t *testing.T, ts *treeStore, root *saga.State, want bool) {
	t.Helper()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.forks) == 0 || len(ts.sagas) < 3 {
		t.Fatalf("the tree has %d sagas and %d fork records: not a tree", len(ts.sagas), len(ts.forks))
	}
	for _, id := range ts.sagas {
		at, ok := ts.SagaExpiry(id)
		switch {
		case id == root.SagaID:
			if ok {
				t.Errorf("the root %s was marked: it expires by its own write", id)
			}
		case ok != want || ok && !at.Equal(root.UpdatedAt):
			t.Errorf("saga %s: marked %v at %s, want %v at the root's end %s", id, ok, at, want, root.UpdatedAt)
		}
	}
	for _, key := range ts.forks {
		if at, ok := ts.ForkExpiry(key); ok != want || ok && !at.Equal(root.UpdatedAt) {
			t.Errorf("fork record %s: marked %v at %s, want %v at the root's end %s", key, ok, at, want, root.UpdatedAt)
		}
	}
}

func TestTreeExpiresWithItsRootThatSucceeded(t *testing.T) {
	t.Parallel()
	for _, batch := range []int{0, 3} { // the default, and a walk in many messages
		r, ts := newTreeRig(t, batch)
		root := runTree(t, r, "t-1")
		if root.Status != durable.StatusSucceeded {
			t.Fatalf("batch %d: %s, want succeeded", batch, root.Status)
		}
		// 5 iterations, 10 branches under them, 2 branches at the top.
		if len(ts.sagas) != 1+5+10+2 || len(ts.forks) != 1+5+1 {
			t.Fatalf("batch %d: %d sagas, %d fork records", batch, len(ts.sagas), len(ts.forks))
		}
		marked(t, ts, root, true)
	}
}

func TestTreeExpiresWithItsRootThatCompensated(t *testing.T) {
	t.Parallel()
	r, ts := newTreeRig(t, 2)
	r.actions.fail = func(c saga.Call) bool {
		return c.Step == "right" && c.SagaID == durable.ChildID(durable.ChildID("t-2", "each", 2, 2), "both", 2, 1)
	}
	root := runTree(t, r, "t-2")
	if root.Status != durable.StatusCompensated {
		t.Fatalf("%s, want compensated", root.Status)
	}
	marked(t, ts, root, true)
}

func TestParkedRootKeepsItsTreeUntilResumedToTheEnd(t *testing.T) {
	t.Parallel()
	r, ts := newTreeRig(t, 0)
	failing := true
	r.actions.fail = func(c saga.Call) bool {
		return c.Step == "right" && c.SagaID == durable.ChildID(durable.ChildID("t-3", "each", 2, 2), "both", 2, 1) ||
			failing && c.Compensation && c.Step == "left"
	}
	root := runTree(t, r, "t-3")
	if root.Status != durable.StatusCompensationFailed {
		t.Fatalf("%s, want parked", root.Status)
	}
	marked(t, ts, root, false)
	if slices.ContainsFunc(r.hand.msgs, func(m durable.Message) bool { return m.Kind == durable.KindExpire }) {
		t.Fatal("a parked root sent an expire")
	}
	failing = false
	r.clock.Advance(time.Hour)
	for range 5 { // an operator resumes until nothing is left parked
		if root = r.get("t-3"); root.Status != durable.StatusCompensationFailed {
			break
		}
		if _, err := r.coord.Resume(context.Background(), "t-3"); err != nil {
			t.Fatal(err)
		}
		r.drain()
	}
	root = r.get("t-3")
	if root.Status != durable.StatusCompensated {
		t.Fatalf("after the resume: %s, want compensated", root.Status)
	}
	marked(t, ts, root, true)
}

// A saga that never forked ends as before: no message more.
func TestRootWithoutForksSendsNoExpire(t *testing.T) {
	t.Parallel()
	r, _ := newTreeRig(t, 0)
	plan := mustCompile(t, `
saga: flat
steps:
  - id: one
    action: svc.one
`)
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "f-1"}); err != nil {
		t.Fatal(err)
	}
	var kinds []durable.MessageKind
	for len(r.hand.msgs) > 0 {
		kinds = append(kinds, r.hand.msgs[0].Kind)
		r.deliver(func(durable.Message) bool { return true })
	}
	if st := r.get("f-1"); st.Status != durable.StatusSucceeded || slices.Contains(kinds, durable.KindExpire) {
		t.Fatalf("%s, messages of kinds %q", st.Status, kinds)
	}
}

// A foreach that fails early launched few of its children: the walk marks
// those it launched, not every element of its list (each mark of a child
// never created would bill a write unit for a condition that fails).
func TestFailedForkWalksOnlyTheChildrenItLaunched(t *testing.T) {
	t.Parallel()
	r, ts := newTreeRig(t, 0)
	plan := mustCompile(t, `
saga: early
input: {items: list}
steps:
  - id: each
    foreach: "${input.items}"
    concurrency: 3
    steps: [{id: work, action: svc.work, compensate: {action: svc.unwork}}]
`)
	items := make([]any, 500)
	for i := range items {
		items[i] = int64(i)
	}
	r.actions.fail = func(c saga.Call) bool { return c.Step == "work" && c.SagaID == durable.ChildID("e-1", "each", 1, 4) }
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "e-1", Input: map[string]any{"items": items}}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	root := r.get("e-1")
	if root.Status != durable.StatusCompensated {
		t.Fatalf("%s, want compensated", root.Status)
	}
	marked(t, ts, root, true)
	// At most one child more per lane than its count: the one the last
	// count may have licensed.
	if launched := len(ts.sagas) - 1; len(ts.marked) > launched+3 || launched > 10 {
		t.Errorf("%d children marked for %d launched of 500", len(ts.marked), launched)
	}
}

// A walk cut off midway (a write that fails, the function's crash) leaves
// some items marked and some not; its message comes back and marks them
// again, and the walk's continuations are sent only once their batch is
// marked.
func TestExpireWalkCutOffLosesNothing(t *testing.T) {
	t.Parallel()
	r, ts := newTreeRig(t, 4)
	failures := 0
	ts.failMark = func(id string) bool {
		if id == durable.ChildID("t-5", "each", 2, 3) && failures < 2 {
			failures++
			return true
		}
		return false
	}
	root := runTree(t, r, "t-5")
	if root.Status != durable.StatusSucceeded || failures != 2 {
		t.Fatalf("%s after %d failed marks", root.Status, failures)
	}
	marked(t, ts, root, true)
}

// A walk whose marks keep failing here and there goes on from where it
// got to rather than starting over: a delivery that marked some of its
// batch before a mark failed sends the rest of the walk in a message of
// its own and succeeds, so the walk's message is not received again and
// again (five failed receives send it to the dead-letter queue, and the
// tree never expires). Here the k-th child of the foreach fails its
// (k+1)-th mark: each start over fails at the next child.
func TestExpireWalkGoesOnFromWhereAMarkFailed(t *testing.T) {
	t.Parallel()
	r, ts := newTreeRig(t, 1000)
	calls := map[string]int{}
	ts.failMark = func(id string) bool {
		for k := range 5 {
			if id == durable.ChildID("t-6", "each", 2, k) {
				calls[id]++
				return calls[id] == k+1
			}
		}
		return false
	}
	plan := mustCompile(t, treeDefinition)
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "t-6", Input: map[string]any{"skus": []any{"a", "b", "c", "d", "e"}}}); err != nil {
		t.Fatal(err)
	}
	failed := 0 // failed deliveries of the root's expire messages
	for range 500 {
		ok, err := r.deliver(func(durable.Message) bool { return true })
		if !ok {
			break
		}
		if err != nil {
			failed++
		}
	}
	root := r.get("t-6")
	if root.Status != durable.StatusSucceeded {
		t.Fatalf("root %s", root.Status)
	}
	marked(t, ts, root, true)
	if failed > 1 {
		t.Fatalf("%d deliveries failed: the walk started over after each failed mark", failed)
	}
}

// The walk that goes on from where a mark failed marks in windows of 16,
// in order, and stops after a window with a failed mark: a continuation
// marks again at most that window, not the rest of the batch. With one
// mark in twenty failing (the simulation's 5%), a foreach of 300 children
// bills under twice 300 marks.
func TestExpireWalkMarksAtMostAWindowAgainAfterAFailedMark(t *testing.T) {
	t.Parallel()
	r, ts := newTreeRig(t, 1000)
	plan := mustCompile(t, `
saga: wide
input: {items: list}
steps:
  - id: each
    foreach: "${input.items}"
    concurrency: 10
    steps: [{id: work, action: svc.work}]
`)
	items := make([]any, 300)
	for i := range items {
		items[i] = int64(i)
	}
	var calls, fails int
	ts.failMark = func(id string) bool {
		calls++ // under ts.mu
		if calls%20 == 0 {
			fails++
			return true
		}
		return false
	}
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "w-1", Input: map[string]any{"items": items}}); err != nil {
		t.Fatal(err)
	}
	deliveries := 0
	for range 5000 {
		ok, _ := r.deliver(func(durable.Message) bool { return true })
		if !ok {
			break
		}
		deliveries++
	}
	root := r.get("w-1")
	if root.Status != durable.StatusSucceeded {
		t.Fatalf("root %s", root.Status)
	}
	for k := range 300 {
		if _, ok := ts.SagaExpiry(durable.ChildID("w-1", "each", 1, k)); !ok {
			t.Fatalf("child %d never marked", k)
		}
	}
	t.Logf("%d marks (%d failed) for 300 children, %d deliveries in all", calls, fails, deliveries)
	if calls > 2*300 {
		t.Fatalf("%d marks for 300 children at 1 failed mark in 20: each continuation marks the rest of the batch again", calls)
	}
}

// The walk's message delivered again after it sent a continuation
// (a worker that died before deleting it) walks again beside the
// continuation; both end, and every item of the tree is marked. Marks
// fail here and there, so continuations of failed marks are sent too.
func TestExpireWalkMessageRedeliveredAfterItsContinuationEnds(t *testing.T) {
	t.Parallel()
	r, ts := newTreeRig(t, 3)
	calls := 0
	ts.failMark = func(string) bool { calls++; return calls%4 == 0 }
	plan := mustCompile(t, treeDefinition)
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "t-9", Input: map[string]any{"skus": []any{"a", "b", "c", "d", "e"}}}); err != nil {
		t.Fatal(err)
	}
	again := map[string]bool{}
	expires, redelivered := 0, 0
	for n := 0; ; n++ {
		if n > 5000 {
			t.Fatalf("the walk never ended: %d expire deliveries", expires)
		}
		if len(r.hand.msgs) == 0 {
			break
		}
		m := r.hand.msgs[0]
		before := len(r.hand.msgs)
		ok, err := r.deliver(func(durable.Message) bool { return true })
		if !ok {
			break
		}
		if m.Kind != durable.KindExpire {
			continue
		}
		expires++
		key := fmt.Sprintf("%s/%d/%d", m.SagaID, m.Attempt, m.Child)
		if err == nil && len(r.hand.msgs) >= before && !again[key] {
			again[key] = true
			redelivered++
			r.hand.msgs = append(r.hand.msgs, m) // delivered again though it was handled
		}
	}
	root := r.get("t-9")
	if root.Status != durable.StatusSucceeded {
		t.Fatalf("root %s", root.Status)
	}
	t.Logf("%d expire deliveries (%d delivered again), %d marks", expires, redelivered, calls)
	marked(t, ts, root, true)
}

// failForks fails a tree's ForkGet and ForkExpire calls as told.
type failForks struct {
	*treeStore
	get, expire func(key string) bool
}

func (s *failForks) ForkGet(ctx context.Context, p *durable.ForkGetParams) (*durable.ForkRecord, error) {
	if s.get != nil && s.get(p.Key) {
		return nil, errHandFault
	}
	return s.treeStore.ForkGet(ctx, p)
}

func (s *failForks) ForkExpire(ctx context.Context, p *durable.ForkExpireParams) error {
	if s.expire != nil && s.expire(p.Key) {
		return errHandFault
	}
	return s.treeStore.ForkExpire(ctx, p)
}

// A walk whose fork record's mark (ForkExpire) or read (ForkGet)
// fails after marks of the same delivery landed goes on in a continuation
// from that visit (from its end, for the record's mark), which fails
// while nothing gets marked and then ends: every item is marked.
func TestExpireWalkGoesOnAfterAForkRecordFails(t *testing.T) {
	t.Parallel()
	eachKey := durable.ForkKey("t-8", "each", 2)
	gets, expires := 0, 0
	expire := func(key string) bool { expires++; return key == eachKey && expires <= 3 }
	get := func(key string) bool {
		if expires > 0 && strings.Contains(key, "#tail#") { // the walk's reads only
			gets++
			return gets <= 2
		}
		return false
	}
	r, ts := newTreeRig(t, 0)
	r.store.Store = &failForks{treeStore: ts, get: get, expire: expire}
	root := runTree(t, r, "t-8")
	if root.Status != durable.StatusSucceeded {
		t.Fatalf("root %s", root.Status)
	}
	for range 50 {
		if ok, _ := r.deliver(func(durable.Message) bool { return true }); !ok {
			break
		}
	}
	if len(r.hand.msgs) != 0 {
		t.Fatalf("%d messages left: the walk never ended", len(r.hand.msgs))
	}
	t.Logf("ForkExpire calls %d, tail ForkGet calls %d", expires, gets)
	marked(t, ts, root, true)
}
