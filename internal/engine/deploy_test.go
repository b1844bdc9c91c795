package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Two versions of one saga, told apart by what they set.
const (
	namedV1 = `
saga: named
steps:
  - id: mark
    set: {version: 1}
  - id: done
    succeed: {output: "${vars.version}"}
`
	namedV2 = `
saga: named
steps:
  - id: mark
    set: {version: 2}
  - id: done
    succeed: {output: "${vars.version}"}
`
)

func deploy(t *testing.T, r *rig, p *saga.Plan) []engine.Deployed {
	t.Helper()
	ds, err := r.coord.Deploy(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func startNamed(r *rig, id, name string, input map[string]any) (*saga.State, error) {
	return r.coord.Start(context.Background(), &engine.StartParams{Name: name, SagaID: id, Input: input})
}

// A start by name runs the current version; a deploy changes it for the
// starts after it, and the sagas in flight finish on the version they
// pinned.
func TestStartByNameRunsTheCurrentVersion(t *testing.T) {
	r := newTextRig(t, namedV1)
	v1, v2 := mustCompile(t, namedV1), mustCompile(t, namedV2)
	if ds := deploy(t, r, v1); len(ds) != 1 || ds[0] != (engine.Deployed{Name: "named", Hash: v1.Hash(), Changed: true}) {
		t.Fatalf("first deploy: %+v", ds)
	}
	a, err := startNamed(r, "a-1", "named", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ds := deploy(t, r, v2); ds[0] != (engine.Deployed{Name: "named", Hash: v2.Hash(), Changed: true}) {
		t.Fatalf("second deploy: %+v", ds)
	}
	b, err := startNamed(r, "b-1", "named", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.DefinitionHash != v1.Hash() || b.DefinitionHash != v2.Hash() {
		t.Fatalf("started on %s and %s, want v1 then v2", a.DefinitionHash, b.DefinitionHash)
	}
	r.drain()
	for id, want := range map[string]int64{"a-1": 1, "b-1": 2} {
		st := r.get(id)
		if st.Status != durable.StatusSucceeded || !equalValues(st.Output, want) {
			t.Errorf("%s: %s with output %#v, want succeeded with %d", id, st.Status, st.Output, want)
		}
	}
	if ds := deploy(t, r, v2); ds[0].Changed {
		t.Fatalf("deploying the current version again: %+v, want unchanged", ds)
	}
}

// A name never deployed is durable.ErrNotFound, naming the saga.
func TestStartByNameOfAnUnknownNameIsNotFound(t *testing.T) {
	r := newTextRig(t, namedV1)
	_, err := startNamed(r, "a-1", "nobody", nil)
	if !errors.Is(err, durable.ErrNotFound) || !strings.Contains(err.Error(), "nobody") {
		t.Fatalf("err = %v, want ErrNotFound naming the saga", err)
	}
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{SagaID: "a-1"}); err == nil {
		t.Fatal("a start with neither a plan nor a name was accepted")
	}
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, Name: "other", SagaID: "a-1"}); err == nil {
		t.Fatal("a start with a plan of another name was accepted")
	}
}

// A start by name repeated after a deploy returns the saga the first
// one started, on the version it pinned; with another input it is
// ErrExists, as a repeated start always was.
func TestStartByNameRepeatedAfterADeployReturnsTheSaga(t *testing.T) {
	r := newTextRig(t, namedV1)
	v1, v2 := mustCompile(t, namedV1), mustCompile(t, namedV2)
	deploy(t, r, v1)
	in := map[string]any{"order": "o-1"}
	if _, err := startNamed(r, "a-1", "named", in); err != nil {
		t.Fatal(err)
	}
	deploy(t, r, v2)
	st, err := startNamed(r, "a-1", "named", in)
	if err != nil {
		t.Fatalf("repeated start after a deploy: %v", err)
	}
	if st.DefinitionHash != v1.Hash() {
		t.Fatalf("repeated start returned a saga on %s, want the pinned v1", st.DefinitionHash)
	}
	if _, err := startNamed(r, "a-1", "named", map[string]any{"order": "o-2"}); !errors.Is(err, durable.ErrExists) {
		t.Fatalf("repeated start with another input: %v, want ErrExists", err)
	}
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: v2, SagaID: "a-1", Input: in}); !errors.Is(err, durable.ErrExists) {
		t.Fatalf("repeated start of another plan (not by name): %v, want ErrExists", err)
	}
}

// A burst of starts by name reads the current version once per
// CurrentTTL; a deploy by another process is run once that has passed.
func TestStartByNameReadsTheCurrentVersionOncePerTTL(t *testing.T) {
	r := newTextRig(t, namedV1)
	var reads atomic.Int64
	r.store.setHook(func(op, key string) error {
		if op == "current" {
			reads.Add(1)
		}
		return nil
	})
	v1, v2 := mustCompile(t, namedV1), mustCompile(t, namedV2)
	deploy(t, r, v1)
	// Another process: a coordinator of its own on the same store.
	other, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: r.store, Queue: r.queue, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	reads.Store(0)
	start := func(id string) *saga.State {
		t.Helper()
		st, err := other.Start(context.Background(), &engine.StartParams{Name: "named", SagaID: id})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, id := range []string{"a-1", "a-2", "a-3"} {
		start(id)
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("3 starts by name read the current version %d times, want 1", n)
	}
	deploy(t, r, v2)
	reads.Store(0)
	if st := start("b-1"); st.DefinitionHash != v1.Hash() {
		t.Fatalf("a start within CurrentTTL of the last read ran %s, want v1 still", st.DefinitionHash)
	}
	r.clock.Advance(engine.CurrentTTL + time.Second)
	if st := start("b-2"); st.DefinitionHash != v2.Hash() {
		t.Fatalf("a start after CurrentTTL ran %s, want v2", st.DefinitionHash)
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("reads of the current version after the deploy: %d, want 1", n)
	}
}

// A deploy stores and makes current each child saga the plan bundles,
// under its own name, and reports each.
func TestDeployMakesEachChildSagaCurrent(t *testing.T) {
	fsys := fstest.MapFS{
		"main.yaml":     &fstest.MapFile{Data: []byte(approvalParent)},
		"approval.yaml": &fstest.MapFile{Data: []byte(approvalChild)},
	}
	p, err := saga.CompileFile(fsys, "main.yaml", saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	child, _ := p.Child("approve")
	r := newTextRig(t, namedV1)
	ds := deploy(t, r, p)
	want := []engine.Deployed{{Name: "order", Hash: p.Hash(), Changed: true}, {Name: "approval", Hash: child.Hash(), Changed: true}}
	if len(ds) != 2 || ds[0] != want[0] || ds[1] != want[1] {
		t.Fatalf("deployed %+v, want %+v", ds, want)
	}
	for _, d := range want {
		rec, err := r.store.DefinitionCurrent(context.Background(), &durable.DefinitionCurrentParams{Name: d.Name, Consistent: true})
		if err != nil || rec.Hash != d.Hash {
			t.Fatalf("current of %s: %+v, %v; want %s", d.Name, rec, err, d.Hash)
		}
	}
	for _, d := range deploy(t, r, p) {
		if d.Changed {
			t.Fatalf("deployed again: %+v changed", d)
		}
	}
}

// A start by name repeated after a deploy whose input the first start's
// does not satisfy (a field added, a type changed) still returns the saga
// the first one started: the start queue redelivers a start whose call
// timed out after its write landed, and refusing the repeat would
// dead-letter a start that was carried out.
func TestStartByNameRepeatedAfterADeployThatChangedTheInput(t *testing.T) {
	const typedV1 = `
saga: typed
input: {order: string}
steps:
  - id: done
    succeed: {output: "${input.order}"}
`
	const typedV2 = `
saga: typed
input: {order: int, region: string}
steps:
  - id: done
    succeed: {output: "${input.region}"}
`
	r := newTextRig(t, typedV1)
	v1, v2 := mustCompile(t, typedV1), mustCompile(t, typedV2)
	deploy(t, r, v1)
	in := map[string]any{"order": "o-1"}
	if _, err := startNamed(r, "t-1", "typed", in); err != nil {
		t.Fatal(err)
	}
	deploy(t, r, v2)
	st, err := startNamed(r, "t-1", "typed", in)
	if err != nil {
		t.Fatalf("repeated start after a deploy that changed the input: %v", err)
	}
	if st.DefinitionHash != v1.Hash() {
		t.Fatalf("repeated start returned a saga on %s, want the pinned v1", st.DefinitionHash)
	}
	// A new saga with that input is refused by v2, as before.
	if _, err := startNamed(r, "t-2", "typed", in); !errors.Is(err, saga.ErrInvalidInput) {
		t.Fatalf("a new start with v1's input: %v, want ErrInvalidInput", err)
	}
	// Another input for t-1 is ErrExists, whatever v2 says of it.
	if _, err := startNamed(r, "t-1", "typed", map[string]any{"order": "o-2"}); !errors.Is(err, durable.ErrExists) {
		t.Fatalf("repeated start with another input: %v, want ErrExists", err)
	}
}
