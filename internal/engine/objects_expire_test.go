package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memobjects"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// endingObjects is memobjects whose ObjectsEnd fails as failEnd says (a
// LIST or a COPY cut off).
type endingObjects struct {
	*memobjects.Objects
	mu      sync.Mutex
	failEnd func(id string) bool
}

func (o *endingObjects) ObjectsEnd(ctx context.Context, p *durable.ObjectsEndParams) error {
	o.mu.Lock()
	fail := o.failEnd != nil && o.failEnd(p.SagaID)
	o.mu.Unlock()
	if fail {
		return errHandFault
	}
	return o.Objects.ObjectsEnd(ctx, p)
}

func newObjectsRig(t *testing.T) (*rig, *treeStore, *endingObjects) {
	ts := &treeStore{Store: memstore.New()}
	objs := &endingObjects{Objects: memobjects.New()}
	return newHandRigOn(t, ts, engine.CoordinatorConfig{Objects: objs}), ts, objs
}

// endedKeys splits the objects held by whether they are marked ended.
func endedKeys(o *endingObjects) (ended, kept []string) {
	for _, k := range o.Keys() {
		if o.Ended(k) > 0 {
			ended = append(ended, k)
		} else {
			kept = append(kept, k)
		}
	}
	return ended, kept
}

// big is a value over the 8 KiB threshold: kept as an object.
func big(tag string) string { return tag + strings.Repeat("x", 9<<10) }

const bigForkDefinition = `
saga: docs
input: {docs: list, more: string}
steps:
  - id: each
    foreach: "${input.docs}"
    as: doc
    steps:
      - id: use
        action: svc.use
        with: {doc: "${doc}"}
        compensate: {action: svc.unuse}
  - id: last
    action: svc.last
`

func startDocs(t *testing.T, r *rig, id string) {
	t.Helper()
	plan := mustCompile(t, bigForkDefinition)
	in := map[string]any{"docs": []any{big("a"), big("b"), big("c")}, "more": big("m")}
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: id, Input: in}); err != nil {
		t.Fatal(err)
	}
}

// The objects of every saga of a tree, the root's and its children's, are
// marked ended once the root ends for good, and not before.
func TestObjectsEndWithTheirTree(t *testing.T) {
	t.Parallel()
	r, ts, objs := newObjectsRig(t)
	startDocs(t, r, "d-1")
	if ended, _ := endedKeys(objs); len(ended) > 0 {
		t.Fatalf("marked while running: %v", ended)
	}
	r.drain()
	if st := r.get("d-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("%s, want succeeded", st.Status)
	}
	ended, kept := endedKeys(objs)
	if len(kept) > 0 {
		t.Errorf("not marked after the tree ended: %v", kept)
	}
	prefixes := map[string]bool{}
	for _, k := range ended {
		prefixes[k[:strings.IndexByte(k, '/')]] = true
	}
	if !prefixes["d-1"] || len(prefixes) < 4 {
		t.Errorf("objects of sagas %v: want the root's and its three children's", prefixes)
	}
	marked(t, ts, r.get("d-1"), true) // the items too, as before
}

// A root that never forked but kept values as objects sends an expire, and
// its objects are marked; one that kept none sends none. A repeated
// expire marks again, harmlessly.
func TestObjectsEndWithARootThatNeverForked(t *testing.T) {
	t.Parallel()
	r, _, objs := newObjectsRig(t)
	plan := mustCompile(t, `
saga: flat
input: {doc: string}
steps:
  - id: one
    action: svc.one
`)
	var expires []durable.Message
	run := func(id string, doc string) {
		t.Helper()
		if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: id, Input: map[string]any{"doc": doc}}); err != nil {
			t.Fatal(err)
		}
		for len(r.hand.msgs) > 0 {
			if m := r.hand.msgs[0]; m.Kind == durable.KindExpire {
				expires = append(expires, m)
			}
			if _, err := r.deliver(func(durable.Message) bool { return true }); err != nil {
				t.Fatal(err)
			}
		}
	}
	run("f-1", "small")
	if len(expires) != 0 {
		t.Fatalf("a saga without objects sent %v", expires)
	}
	run("f-2", big("d"))
	if len(expires) != 1 || expires[0].SagaID != "f-2" {
		t.Fatalf("expires %v, want one of f-2", expires)
	}
	keys := objs.Keys()
	if len(keys) != 1 || objs.Ended(keys[0]) != 1 {
		t.Fatalf("objects %v, marked %d times; want one, marked once", keys, objs.Ended(keys[0]))
	}
	if _, err := r.coord.Handle(context.Background(), durable.AppendMessage(nil, expires[0])); err != nil {
		t.Fatalf("the expire again: %v", err)
	}
	if objs.Ended(keys[0]) != 2 {
		t.Fatalf("marked %d times after the repeat, want 2", objs.Ended(keys[0]))
	}
}

// A root whose first value kept as an object is written by its last
// transition (a set step's result) sends an expire too.
func TestObjectsEndWhenTheFirstObjectComesLast(t *testing.T) {
	t.Parallel()
	r, _, objs := newObjectsRig(t)
	plan := mustCompile(t, `
saga: late
input: {doc: string}
steps:
  - id: one
    action: svc.one
  - id: grow
    set: {doc: "${input.doc + input.doc}"}
`)
	doc := strings.Repeat("y", 5<<10) // under the threshold; twice it, over
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "l-1", Input: map[string]any{"doc": doc}}); err != nil {
		t.Fatal(err)
	}
	if len(objs.Keys()) != 0 {
		t.Fatalf("objects %v before the end", objs.Keys())
	}
	r.drain()
	keys := objs.Keys()
	if len(keys) != 1 || objs.Ended(keys[0]) != 1 {
		t.Fatalf("objects %v; want the set's value, marked", keys)
	}
}

// A parked tree keeps its objects unmarked; resumed to its end, they are
// marked. A saga waiting (here, on the resume) has nothing marked either.
func TestParkedTreeKeepsItsObjectsUntilItEnds(t *testing.T) {
	t.Parallel()
	r, _, objs := newObjectsRig(t)
	failing := true
	r.actions.fail = func(c saga.Call) bool {
		return c.Step == "last" || failing && c.Compensation && c.SagaID == durable.ChildID("p-1", "each", 1, 1)
	}
	startDocs(t, r, "p-1")
	r.drain()
	if st := r.get("p-1"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("%s, want parked", st.Status)
	}
	if ended, _ := endedKeys(objs); len(ended) > 0 {
		t.Fatalf("a parked tree's objects marked: %v", ended)
	}
	failing = false
	r.clock.Advance(24 * time.Hour)
	for range 5 {
		if r.get("p-1").Status != durable.StatusCompensationFailed {
			break
		}
		if _, err := r.coord.Resume(context.Background(), "p-1"); err != nil {
			t.Fatal(err)
		}
		r.drain()
	}
	if st := r.get("p-1"); st.Status != durable.StatusCompensated {
		t.Fatalf("after the resume: %s, want compensated", st.Status)
	}
	if _, kept := endedKeys(objs); len(kept) > 0 {
		t.Fatalf("after the end, not marked: %v", kept)
	}
}

// A mark of objects that fails does not lose the mark: the root's fails
// the delivery, which comes back; a child's resumes the walk from that
// child in a message of its own.
func TestObjectsEndFailingOnceLosesNothing(t *testing.T) {
	t.Parallel()
	for _, who := range []string{"d-2", durable.ChildID("d-2", "each", 1, 1)} {
		r, _, objs := newObjectsRig(t)
		failed := 0
		objs.failEnd = func(id string) bool {
			if id == who && failed == 0 {
				failed++
				return true
			}
			return false
		}
		startDocs(t, r, "d-2")
		r.drain()
		if failed != 1 {
			t.Fatalf("%s: the fault fired %d times", who, failed)
		}
		if _, kept := endedKeys(objs); len(kept) > 0 {
			t.Errorf("%s failing once: not marked %v", who, kept)
		}
		if len(r.hand.msgs) > 0 {
			t.Errorf("%s failing once: messages left %v", who, r.hand.msgs)
		}
	}
}
