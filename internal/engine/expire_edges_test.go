package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// The walk that goes on from where a mark failed marks in windows of 16,
// in order, and stops after a window with a failed mark: a continuation
// marks again at most that window, not the rest of the batch. With one
// mark in twenty failing (the simulation's 5%), a foreach of 300 children
// bills under twice 300 marks.
func TestExpireWalkMarksAtMostAWindowAgainAfterAFailedMark(t *testing.T) {
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
		if len(r.q.msgs) == 0 {
			break
		}
		m := r.q.msgs[0]
		before := len(r.q.msgs)
		ok, err := r.deliver(func(durable.Message) bool { return true })
		if !ok {
			break
		}
		if m.Kind != durable.KindExpire {
			continue
		}
		expires++
		key := fmt.Sprintf("%s/%d/%d", m.SagaID, m.Attempt, m.Child)
		if err == nil && len(r.q.msgs) >= before && !again[key] {
			again[key] = true
			redelivered++
			r.q.msgs = append(r.q.msgs, m) // delivered again though it was handled
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
	if len(r.q.msgs) != 0 {
		t.Fatalf("%d messages left: the walk never ended", len(r.q.msgs))
	}
	t.Logf("ForkExpire calls %d, tail ForkGet calls %d", expires, gets)
	marked(t, ts, root, true)
}
