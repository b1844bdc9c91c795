package saga_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

const offloadBytes = 64 << 10

// largeState is a saga holding a 1 MiB document in its input, a 200 KiB
// map in a var, a small var, and a 100 KiB secret.
func largeState() *saga.State {
	doc := strings.Repeat("d", 1<<20)
	items := map[string]any{}
	for i := range 200 {
		items[strings.Repeat("k", 3)+string(rune('a'+i%26))+string(rune('a'+i/26))] = strings.Repeat("v", 1<<10)
	}
	return &saga.State{SagaID: "o-1", Name: "docs", DefinitionHash: "h", Status: durable.StatusRunning, Version: 3,
		Input: map[string]any{"doc": doc, "card": strings.Repeat("4", 100<<10), "n": int64(1)},
		Vars:  map[string]any{"items": items, "small": "s"},
		Stack: []saga.Completion{{Step: 0, Seq: 1, Out: items, HasOut: true}},
	}
}

// objectsOf is a getter for Hydrate over the objects an encoding listed,
// checking each body against its reference.
func objectsOf(t *testing.T, objs []saga.Object) func(saga.Ref) (any, error) {
	return func(r saga.Ref) (any, error) {
		for _, o := range objs {
			if o.Ref == r {
				if err := r.CheckBody(o.Body); err != nil {
					t.Fatal(err)
				}
				return saga.DecodeValue(o.Body)
			}
		}
		return nil, durable.ErrNotFound
	}
}

func TestRecordOffloadKeepsLargeValuesAsReferences(t *testing.T) {
	t.Parallel()
	st := largeState()
	off := &saga.Offload{Bytes: offloadBytes, KeepInput: []string{"card"}}
	rec, err := st.RecordOffload(nil, off)
	if err != nil {
		t.Fatal(err)
	}
	// The document and the items map (twice: as a var and kept on the
	// stack) are two objects; the secret card stays inline.
	if len(off.Objects) != 2 {
		t.Fatalf("%d objects, want 2 (the document, the items once)", len(off.Objects))
	}
	for _, o := range off.Objects {
		if o.Ref.Size != len(o.Body) || o.Ref.Hash != sha256.Sum256(o.Body) || o.Ref.Size <= offloadBytes {
			t.Errorf("object %v: body of %d bytes does not match its reference", o.Ref, len(o.Body))
		}
	}
	if n := len(rec.State); n < 100<<10 || n > 100<<10+1<<10 {
		t.Errorf("state of %d bytes; want the 100 KiB secret inline and about 150 bytes besides", n)
	}
	var got saga.State
	refs, err := got.UnmarshalBinaryRefs(rec.State)
	if err != nil || !refs {
		t.Fatalf("UnmarshalBinaryRefs: %v, %v; want references reported", refs, err)
	}
	if _, ok := got.Input["doc"].(saga.Ref); !ok {
		t.Fatalf("input.doc decoded as %T, want a saga.Ref", got.Input["doc"])
	}
	if _, ok := got.Input["card"].(string); !ok {
		t.Fatalf("the secret input.card decoded as %T: a secret stays inline", got.Input["card"])
	}
	if !got.HasRefs() {
		t.Fatal("HasRefs: false for a state with references")
	}
	if err := got.Hydrate(objectsOf(t, off.Objects)); err != nil {
		t.Fatal(err)
	}
	if got.HasRefs() {
		t.Fatal("HasRefs: true after Hydrate")
	}
	if !reflect.DeepEqual(got.Input, st.Input) || !reflect.DeepEqual(got.Vars, st.Vars) || !reflect.DeepEqual(got.Stack, st.Stack) {
		t.Fatal("hydrated state differs from the state encoded")
	}
}

func TestRecordOffloadOfSmallStateIsRecord(t *testing.T) {
	t.Parallel()
	st := &saga.State{SagaID: "o-1", Status: durable.StatusRunning, Version: 1, Input: map[string]any{"a": "x"}, Vars: map[string]any{"b": []any{int64(1)}}, Output: "y"}
	plain, err := st.Record(nil)
	if err != nil {
		t.Fatal(err)
	}
	off := &saga.Offload{Bytes: offloadBytes}
	withOff, err := st.RecordOffload(nil, off)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain.State, withOff.State) || len(off.Objects) != 0 {
		t.Fatalf("a state with no value over the threshold encodes differently with an Offload (%d objects)", len(off.Objects))
	}
	var got saga.State
	if refs, err := got.UnmarshalBinaryRefs(plain.State); err != nil || refs {
		t.Fatalf("UnmarshalBinaryRefs of a state without references: %v, %v", refs, err)
	}
}

func TestRecordOffloadUsesKnownReferences(t *testing.T) {
	t.Parallel()
	st := largeState()
	first := &saga.Offload{Bytes: offloadBytes}
	if _, err := st.RecordOffload(nil, first); err != nil {
		t.Fatal(err)
	}
	known := map[string]saga.Ref{}
	for _, o := range first.Objects {
		if s, ok := o.Value.(string); ok {
			known[s[:1]] = o.Ref
		}
	}
	again := &saga.Offload{Bytes: offloadBytes, Known: func(v any) (saga.Ref, bool) {
		if s, ok := v.(string); ok && len(s) == 1<<20 {
			r, ok := known[s[:1]]
			return r, ok
		}
		return saga.Ref{}, false
	}}
	rec, err := st.RecordOffload(nil, again)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range again.Objects {
		if s, ok := o.Value.(string); ok && len(s) == 1<<20 {
			t.Fatal("a value Known knew was listed to put again")
		}
	}
	var got saga.State
	if err := got.UnmarshalBinary(rec.State); err != nil {
		t.Fatal(err)
	}
	if got.Input["doc"] != known["d"] {
		t.Fatalf("input.doc is %v, want the known reference %v", got.Input["doc"], known["d"])
	}
}

func TestRecordOffloadRefusesValueOverMaxValueBytes(t *testing.T) {
	t.Parallel()
	st := &saga.State{SagaID: "o-1", Status: durable.StatusRunning, Vars: map[string]any{"huge": strings.Repeat("h", saga.MaxValueBytes+1)}}
	_, err := st.RecordOffload(nil, &saga.Offload{Bytes: offloadBytes})
	if !errors.Is(err, saga.ErrUnstorable) {
		t.Fatalf("a value over MaxValueBytes: %v, want ErrUnstorable", err)
	}
}

func TestReferenceDecodesOnlyAtTheTopOfAValue(t *testing.T) {
	t.Parallel()
	st := &saga.State{SagaID: "o-1", Status: durable.StatusRunning, Vars: map[string]any{"doc": strings.Repeat("d", 100<<10)}}
	off := &saga.Offload{Bytes: offloadBytes}
	rec, err := st.RecordOffload(nil, off)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := saga.DecodeValue(rec.State[3:]); err == nil {
		t.Fatal("DecodeValue of a state's fields: no error")
	}
	// A body is a value, never a reference.
	if _, err := saga.DecodeValue(append([]byte{12, 0}, make([]byte, 32)...)); err == nil {
		t.Fatal("DecodeValue of a bare reference: no error")
	}
}

func TestRefCheckBody(t *testing.T) {
	t.Parallel()
	body := []byte("some body")
	r := saga.Ref{Hash: sha256.Sum256(body), Size: len(body)}
	if err := r.CheckBody(body); err != nil {
		t.Fatal(err)
	}
	if err := r.CheckBody([]byte("some bodY")); err == nil {
		t.Fatal("CheckBody of another body: no error")
	}
	if k := r.Key("o-1.pay.1.0"); !strings.HasPrefix(k, "o-1.pay.1.0/") || len(k) != len("o-1.pay.1.0/")+64 {
		t.Fatalf("Key: %q", k)
	}
}

const largeOutputSaga = `
saga: docs
input: {doc: string}
steps:
  - id: render
    action: docs.render
    with: {doc: "${input.doc}"}
    out: rendered
    compensate: {action: docs.unrender, with: {size: "${has(vars.rendered) ? size(vars.rendered.pdf) : -1}"}}
  - id: store
    action: docs.store
    with: {pdf: "${vars.rendered.pdf}"}
`

// With OffloadBytes, a 5 MiB output fits a state measured under its
// limit, the expressions pass a 1 MiB input and the output on, and the
// compensation reads the output; without it, the output takes the state
// past its limit.
func TestAdvanceWithOffloadKeepsLargeValues(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, largeOutputSaga)
	doc := strings.Repeat("d", 1<<20)
	for _, tt := range []struct {
		name       string
		offload    int
		storeFails bool
		want       durable.Status
		undoneSize int64 // what the compensation got; 0: it did not run
	}{
		{"offload", offloadBytes, false, durable.StatusSucceeded, 0},
		{"offload, compensated", offloadBytes, true, durable.StatusCompensated, 5 << 20},
		{"inline", 0, false, durable.StatusCompensated, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in, err := p.CheckInputWithin(map[string]any{"doc": doc}, tt.offload)
			if tt.offload == 0 {
				if err == nil {
					t.Fatal("a 1 MiB input inline: no error")
				}
				in = map[string]any{"doc": "small"}
			} else if err != nil {
				t.Fatal(err)
			}
			st := &saga.State{}
			ev := saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "o-1", Input: in, StoreLimit: saga.MaxStateBytes, OffloadBytes: tt.offload}
			if err := p.Advance(st, ev); err != nil {
				t.Fatal(err)
			}
			for range 10 {
				if _, ok := st.Pending(); !ok {
					break
				}
				call, err := p.CallWithin(st, t0, tt.offload)
				if err != nil {
					t.Fatal(err)
				}
				var out any = map[string]any{"ok": true}
				var actErr error
				if call.Action == "docs.unrender" {
					if got := call.Input.(map[string]any)["size"]; got != tt.undoneSize {
						t.Fatalf("the compensation got size %v, want %d", got, tt.undoneSize)
					}
				}
				if call.Action == "docs.store" && tt.storeFails {
					actErr = saga.Permanent(errors.New("disk full"))
				}
				if call.Action == "docs.render" {
					if tt.offload > 0 && call.Input.(map[string]any)["doc"] != doc {
						t.Fatal("the action did not get the 1 MiB input")
					}
					out = map[string]any{"pdf": strings.Repeat("p", 5<<20)}
				}
				if call.Action == "docs.store" && len(call.Input.(map[string]any)["pdf"].(string)) != 5<<20 {
					t.Fatal("the next step did not get the 5 MiB output")
				}
				if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: out, Err: actErr, StoreLimit: saga.MaxStateBytes, OffloadBytes: tt.offload}); err != nil {
					t.Fatal(err)
				}
			}
			if st.Status != tt.want {
				t.Fatalf("status %s, want %s (failure %v)", st.Status, tt.want, st.Failure)
			}
			if tt.offload == 0 && st.Failure.Type != lang.ErrorTypeStateTooLarge {
				t.Fatalf("failure %v, want StateTooLarge", st.Failure)
			}
		})
	}
}

// A value nested as deep as a state may hold (MaxDataDepth levels under
// it) is kept as an object and read back: the body's decoding counts
// depth from the value itself, as the state's does.
func TestOffloadedValueAtTheDepthLimitDecodes(t *testing.T) {
	t.Parallel()
	var v any = strings.Repeat("x", 100<<10)
	for range saga.MaxDataDepth {
		v = []any{v}
	}
	if _, err := saga.CheckValue(v); err != nil {
		t.Fatalf("the value is past the depth limit: %v", err)
	}
	st := &saga.State{SagaID: "o-1", Status: durable.StatusRunning, Vars: map[string]any{"deep": v}}
	off := &saga.Offload{Bytes: offloadBytes}
	if _, err := st.RecordOffload(nil, off); err != nil || len(off.Objects) != 1 {
		t.Fatalf("%v, %d objects", err, len(off.Objects))
	}
	got, err := saga.DecodeValue(off.Objects[0].Body)
	if err != nil {
		t.Fatalf("DecodeValue of a value at the depth limit: %v", err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatal("decoded value differs")
	}
}

// A state encoded with a reference says so (State.Objects), and keeps
// saying so once no reference is left: its objects are marked when its
// tree ends, those of values it replaced too.
func TestObjectsFlagOutlivesItsReferences(t *testing.T) {
	t.Parallel()
	st := largeState()
	off := &saga.Offload{Bytes: offloadBytes, KeepInput: []string{"card"}}
	rec, err := st.RecordOffload(nil, off)
	if err != nil {
		t.Fatal(err)
	}
	if off.Refs != 3 {
		t.Errorf("%d references written, want 3 (the document, the items twice)", off.Refs)
	}
	read := &saga.State{}
	if refs, err := read.UnmarshalBinaryRefs(rec.State); err != nil || !refs || !read.Objects {
		t.Fatalf("read back: refs %v, Objects %v, %v; want both", refs, read.Objects, err)
	}
	small := &saga.State{SagaID: "o-1", Status: durable.StatusSucceeded, Version: 9, Objects: true}
	b, err := small.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	again := &saga.State{}
	if err := again.UnmarshalBinary(b); err != nil || !again.Objects {
		t.Fatalf("a state without references that had some: Objects %v, %v", again.Objects, err)
	}
	plain := &saga.State{}
	b, _ = (&saga.State{SagaID: "o-2", Status: durable.StatusRunning, Version: 1}).MarshalBinary()
	if err := plain.UnmarshalBinary(b); err != nil || plain.Objects {
		t.Fatalf("a state that never had references: Objects %v, %v", plain.Objects, err)
	}
}

// Secret fields stay inline, so with an object store they keep the
// inline input's limit together: an input whose secrets pass it is
// refused before the saga starts, not started to fail at once with a
// state too large to write. Other fields go up to the object limit.
func TestSecretInputsKeepTheInlineLimitWithObjects(t *testing.T) {
	plan, err := saga.Compile("s.yaml", []byte("saga: s\ninput: {card: secret string, doc: string}\nsteps:\n  - {id: done, succeed: {output: \"${input.doc}\"}}\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("d", 1<<20)
	if _, err := plan.CheckInputWithin(map[string]any{"card": "4242", "doc": big}, offloadBytes); err != nil {
		t.Fatalf("a large plain field: %v", err)
	}
	secret := strings.Repeat("4", 350<<10)
	_, err = plan.CheckInputWithin(map[string]any{"card": secret, "doc": "x"}, offloadBytes)
	if !errors.Is(err, saga.ErrInvalidInput) || !strings.Contains(err.Error(), "secret fields stay inline") || strings.Contains(err.Error(), "4444") {
		t.Fatalf("a 350 KiB secret: %v", err)
	}
}
