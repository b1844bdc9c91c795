package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memobjects"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

// largeDocs takes a document, renders it to a 5 MiB PDF and publishes
// it; each done step is undone with what it read or returned.
const largeDocs = `
saga: docs
input: {doc: string}
steps:
  - id: ingest
    action: docs.ingest
    with: {doc: "${input.doc}"}
    out: ingested
    compensate: {action: docs.discard, with: {doc: "${input.doc}"}}
  - id: render
    action: docs.render
    with: {doc: "${input.doc}", id: "${vars.ingested.id}"}
    out: rendered
    compensate: {action: docs.unrender, with: {pdf: "${vars.rendered.pdf}"}}
  - id: publish
    action: docs.publish
    with: {pdf: "${vars.rendered.pdf}"}
`

const (
	docBytes = 1 << 20
	pdfBytes = 5 << 20
)

// docActions are the docs actions; publish fails for good when fail is
// set. Each records what it got: the sizes of its string inputs.
func docActions(fail bool) (*engine.Registry, func() []string) {
	var (
		mu    sync.Mutex
		calls []string
	)
	note := func(call saga.Call) {
		in, _ := call.Input.(map[string]any)
		mu.Lock()
		defer mu.Unlock()
		for _, k := range []string{"doc", "pdf"} {
			if s, ok := in[k].(string); ok {
				calls = append(calls, fmt.Sprintf("%s(%s=%d)", call.Action, k, len(s)))
			}
		}
	}
	r := engine.NewRegistry()
	r.MustRegister("docs.ingest", func(ctx context.Context, call saga.Call) (any, error) {
		note(call)
		return map[string]any{"id": "d-1"}, nil
	})
	r.MustRegister("docs.render", func(ctx context.Context, call saga.Call) (any, error) {
		note(call)
		return map[string]any{"pdf": strings.Repeat("p", pdfBytes)}, nil
	})
	r.MustRegister("docs.publish", func(ctx context.Context, call saga.Call) (any, error) {
		note(call)
		if fail {
			return nil, saga.Permanent(errors.New("the printer is on fire"))
		}
		return map[string]any{"ok": true}, nil
	})
	for _, undo := range []string{"docs.discard", "docs.unrender"} {
		r.MustRegister(undo, func(ctx context.Context, call saga.Call) (any, error) {
			note(call)
			return nil, nil
		})
	}
	return r, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
}

// A saga with a 1 MiB input and a 5 MiB action output runs with its
// values kept as objects: the item holds references only, each value is
// put once whatever the number of writes that refer to it, and the
// compensations, run when the last step fails, get both values whole.
func TestLargeValuesRunAndCompensateByReference(t *testing.T) {
	t.Parallel()
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("publish fails %v", fail), func(t *testing.T) {
			t.Parallel()
			actions, calls := docActions(fail)
			objects := memobjects.New()
			rt, ctx := startRuntime(t, embedded.Config{Actions: actions, Objects: objects})
			doc := strings.Repeat("d", docBytes)
			st, err := rt.Run(ctx, &engine.StartParams{Plan: sagatest.MustCompile(t, largeDocs), SagaID: "doc-1", Input: map[string]any{"doc": doc}})
			if err != nil {
				t.Fatal(err)
			}
			want := durable.StatusSucceeded
			wantCalls := []string{"docs.ingest(doc=1048576)", "docs.render(doc=1048576)", "docs.publish(pdf=5242880)"}
			if fail {
				want = durable.StatusCompensated
				wantCalls = append(wantCalls, "docs.unrender(pdf=5242880)", "docs.discard(doc=1048576)")
			}
			if st.Status != want {
				t.Fatalf("status %s, want %s (failure %v)", st.Status, want, st.Failure)
			}
			if got := calls(); strings.Join(got, " ") != strings.Join(wantCalls, " ") {
				t.Fatalf("calls:\n got %v\nwant %v", got, wantCalls)
			}
			if st.Input["doc"] != doc {
				t.Fatal("the saga read back does not hold its input as a value")
			}
			rec, err := rt.Store.SagaGet(ctx, &durable.SagaGetParams{SagaID: "doc-1"})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(rec.State); n > 4<<10 {
				t.Fatalf("stored state of %d bytes: the values are not kept apart", n)
			}
			s := objects.Stats()
			if s.Objects != 2 || s.Puts != 2 || s.Bytes < docBytes+pdfBytes || s.Bytes > docBytes+pdfBytes+1<<10 {
				t.Fatalf("objects %+v: want the document and the PDF, each put once", s)
			}
			if s.Gets != 0 {
				t.Fatalf("%d gets: a process reads back none of the values it put (its cache)", s.Gets)
			}
			t.Logf("stored state %d bytes; objects %+v", len(rec.State), s)
		})
	}
}

// A process that did not put the values (a cold cache: another Lambda
// instance) reads each once, checked against its hash; an object gone is
// an error naming the saga (ErrValueMissing), never a saga without its
// value, and never a saga that is not there (durable.ErrNotFound: a join
// would take a child whose value is missing for one never launched).
func TestLargeValuesReadByAnotherProcess(t *testing.T) {
	t.Parallel()
	actions, _ := docActions(false)
	objects := memobjects.New()
	rt, ctx := startRuntime(t, embedded.Config{Actions: actions, Objects: objects})
	doc := strings.Repeat("d", docBytes)
	if _, err := rt.Run(ctx, &engine.StartParams{Plan: sagatest.MustCompile(t, largeDocs), SagaID: "doc-1", Input: map[string]any{"doc": doc}}); err != nil {
		t.Fatal(err)
	}
	other, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: rt.Store, Queue: rt.Queue, Objects: objects})
	if err != nil {
		t.Fatal(err)
	}
	before := objects.Stats().Gets
	st, err := other.Get(ctx, "doc-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Input["doc"] != doc || len(st.Vars["rendered"].(map[string]any)["pdf"].(string)) != pdfBytes {
		t.Fatal("another process reads the saga without its values")
	}
	if _, err := other.Get(ctx, "doc-1"); err != nil {
		t.Fatal(err)
	}
	if gets := objects.Stats().Gets - before; gets != 2 {
		t.Fatalf("%d gets for two reads of a saga with two values: want each value read once", gets)
	}
	// Without the object store, a reader sees the references, and a
	// transition is refused rather than run on them.
	none, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: rt.Store, Queue: rt.Queue})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := none.Get(ctx, "doc-1"); err != nil || !st.HasRefs() {
		t.Fatalf("Get without objects: %v; want the state with its references", err)
	}
	if _, err := none.Cancel(ctx, "doc-1"); !errors.Is(err, engine.ErrNoObjects) {
		t.Fatalf("Cancel without objects: %v, want ErrNoObjects", err)
	}
	cold, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: rt.Store, Queue: rt.Queue, Objects: objects})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range objects.Keys() {
		objects.Delete(k) // expired, say
	}
	_, err = cold.Get(ctx, "doc-1")
	if !errors.Is(err, engine.ErrValueMissing) || errors.Is(err, durable.ErrNotFound) || !strings.Contains(err.Error(), "doc-1") {
		t.Fatalf("a saga whose object is gone: %v, want ErrValueMissing naming the saga, and not ErrNotFound", err)
	}
}

// flakyObjects fails the first put of every key after the first n puts.
type flakyObjects struct {
	*memobjects.Objects
	mu     sync.Mutex
	n      int
	failed map[string]bool
}

func (f *flakyObjects) ObjectPut(ctx context.Context, p *durable.ObjectPutParams) error {
	f.mu.Lock()
	fail := f.n == 0 && !f.failed[p.Key]
	if f.n > 0 {
		f.n--
	}
	if fail {
		f.failed[p.Key] = true
	}
	f.mu.Unlock()
	if fail {
		return errors.New("put: connection reset")
	}
	return f.Objects.ObjectPut(ctx, p)
}

// A put that fails leaves the transition unwritten: the message comes
// again, the action runs again under its key, and the saga succeeds with
// every reference it stores resolvable.
func TestLargeValuesSurviveAFailedPut(t *testing.T) {
	t.Parallel()
	actions, calls := docActions(false)
	objects := &flakyObjects{Objects: memobjects.New(), n: 1, failed: map[string]bool{}}
	rt, ctx := startRuntime(t, embedded.Config{Actions: actions, Objects: objects, Visibility: 50 * time.Millisecond})
	st, err := rt.Run(ctx, &engine.StartParams{Plan: sagatest.MustCompile(t, largeDocs), SagaID: "doc-1", Input: map[string]any{"doc": strings.Repeat("d", docBytes)}})
	if err != nil || st.Status != durable.StatusSucceeded {
		t.Fatalf("%v %v", st, err)
	}
	// Render runs again (at least once more: a slow run may see its
	// message come back while it still works), and publish gets the PDF.
	got := strings.Join(calls(), " ")
	if strings.Count(got, "docs.render(doc=1048576)") < 2 || !strings.HasSuffix(got, "docs.publish(pdf=5242880)") {
		t.Fatalf("calls: %s; want render again after its output's put failed, then publish with the PDF", got)
	}
	cold, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: rt.Store, Queue: rt.Queue, Objects: objects})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cold.Get(ctx, "doc-1"); err != nil {
		t.Fatalf("the saga refers to an object that is not there: %v", err)
	}
}

// Without an object store, a 1 MiB input is refused at the start, as
// every value must fit the state.
func TestLargeInputRefusedWithoutObjects(t *testing.T) {
	t.Parallel()
	actions, _ := docActions(false)
	rt, err := embedded.Start(embedded.Config{Actions: actions})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	_, err = rt.Coordinator.Start(context.Background(), &engine.StartParams{Plan: sagatest.MustCompile(t, largeDocs), SagaID: "doc-1", Input: map[string]any{"doc": strings.Repeat("d", docBytes)}})
	if !errors.Is(err, saga.ErrInvalidInput) {
		t.Fatalf("a 1 MiB input without objects: %v, want ErrInvalidInput", err)
	}
}

// signedDocs awaits two signals with large payloads and passes them on.
const signedDocs = `
saga: signed
input: {id: string}
steps:
  - id: first
    await: {signal: draft, timeout: 1h}
    out: draft
  - id: second
    await: {signal: signed, timeout: 1h}
    out: signed
  - id: file
    action: docs.file
    with: {draft: "${vars.draft.text}", signed: "${vars.signed.text}"}
`

// A signal's payload over the threshold is kept by reference, whether
// the saga awaits it (draft) or keeps it for a later await (signed, sent
// first): the action gets both whole, and the item stays small.
func TestLargeSignalPayloadsByReference(t *testing.T) {
	t.Parallel()
	var got []int
	actions := engine.NewRegistry()
	actions.MustRegister("docs.file", func(ctx context.Context, call saga.Call) (any, error) {
		in := call.Input.(map[string]any)
		got = []int{len(in["draft"].(string)), len(in["signed"].(string))}
		return nil, nil
	})
	objects := memobjects.New()
	rt, ctx := startRuntime(t, embedded.Config{Actions: actions, Objects: objects})
	if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: sagatest.MustCompile(t, signedDocs), SagaID: "s-1", Input: map[string]any{"id": "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitReceiving(ctx, "s-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Signal(ctx, "s-1", "signed", map[string]any{"text": strings.Repeat("s", 2<<20)}, embedded.SignalID("sig-1")); err != nil {
		t.Fatalf("a 2 MiB signal kept for a later await: %v", err)
	}
	rec, err := rt.Store.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rec.State); n > 4<<10 {
		t.Fatalf("state of %d bytes with a kept 2 MiB signal: not by reference", n)
	}
	if _, err := rt.Signal(ctx, "s-1", "draft", map[string]any{"text": strings.Repeat("d", 1<<20)}, embedded.SignalID("sig-2")); err != nil {
		t.Fatalf("a 1 MiB signal awaited: %v", err)
	}
	st, err := rt.Wait(ctx, "s-1")
	if err != nil || st.Status != durable.StatusSucceeded {
		t.Fatalf("%v %v", st, err)
	}
	if len(got) != 2 || got[0] != 1<<20 || got[1] != 2<<20 {
		t.Fatalf("the action got %v bytes, want the 1 MiB draft and the 2 MiB signature", got)
	}
	if s := objects.Stats(); s.Objects != 2 {
		t.Fatalf("objects %+v: want the two payloads", s)
	}
}

// Two actions returning equal 1 MiB outputs (different values in
// memory, one content) make one object, put once: a put is skipped when
// the process knows the saga's key holds that content.
func TestEqualValuesArePutOnce(t *testing.T) {
	t.Parallel()
	actions := engine.NewRegistry()
	actions.MustRegister("docs.copy", func(ctx context.Context, call saga.Call) (any, error) {
		return map[string]any{"text": strings.Repeat("c", 1<<20)}, nil // a new string each call
	})
	objects := memobjects.New()
	rt, ctx := startRuntime(t, embedded.Config{Actions: actions, Objects: objects})
	const copies = `
saga: copies
steps:
  - {id: a, action: docs.copy, out: a}
  - {id: b, action: docs.copy, out: b}
`
	st, err := rt.Run(ctx, &engine.StartParams{Plan: sagatest.MustCompile(t, copies), SagaID: "c-1"})
	if err != nil || st.Status != durable.StatusSucceeded {
		t.Fatalf("%v %v", st, err)
	}
	if s := objects.Stats(); s.Objects != 1 || s.Puts != 1 {
		t.Fatalf("objects %+v: want one object, put once", s)
	}
}

// startRuntime starts an embedded runtime for one test, closed at its
// end, and a context that bounds the test's waits.
func startRuntime(t *testing.T, cfg embedded.Config) (*embedded.Runtime, context.Context) {
	t.Helper()
	rt, err := embedded.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return rt, ctx
}
