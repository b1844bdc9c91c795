package saga_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

// A chain runs its next step from the state it holds, not from a read
// (docs/PROTOCOL.md, "Chains"): every value that enters the state must
// already be what the codec reads back, or the step goes otherwise.

// TestCheckValueGivesWhatAReadGives: an action output holding a time in
// another location with a monotonic reading (time.Now() in a Go action),
// or nil bytes, is stored as the codec reads it back: UTC, no monotonic
// reading, empty bytes. The output itself is not changed.
func TestCheckValueGivesWhatAReadGives(t *testing.T) {
	at := time.Now().In(time.FixedZone("EET", 2*3600))
	out := map[string]any{"at": at, "b": []byte(nil), "l": []any{at}}
	got, err := saga.CheckValue(out)
	if err != nil {
		t.Fatal(err)
	}
	read := sagatest.ReadBack(t, &saga.State{Vars: map[string]any{"r": got}}).Vars["r"]
	if !reflect.DeepEqual(got, read) {
		t.Fatalf("CheckValue gave %#v, a read gives %#v", got, read)
	}
	if g := got.(map[string]any)["at"].(time.Time); g.String() != at.UTC().Round(0).String() {
		t.Errorf("time %s checked as %s, want it in UTC with no monotonic reading", at, g)
	}
	if out["at"] != at || out["b"].([]byte) != nil || out["l"].([]any)[0] != at {
		t.Errorf("CheckValue changed the output it checked: %#v", out)
	}
}

// TestExpressionTimesAreUTC: a set step that writes a time parsed with
// an offset holds it in UTC, so that the action after it, formatting it,
// gets the same text from the state in memory (a chain) and from a read
// (a message). It got "2024-01-01T00:00:00+02:00" from memory, and
// "2023-12-31T22:00:00Z" from a read.
func TestExpressionTimesAreUTC(t *testing.T) {
	p := mustCompile(t, `saga: held
steps:
  - id: first
    action: svc.first
  - id: stamp
    set: {t: "${timestamp('2024-01-01T00:00:00+02:00')}"}
  - id: second
    action: svc.second
    with: {t: "${string(vars.t)}", at: "${vars.t}"}
`)
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, SagaID: "s-1", Now: t0}); err != nil {
		t.Fatal(err)
	}
	if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0, Output: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	read := sagatest.ReadBack(t, st)
	if !reflect.DeepEqual(st.Vars, read.Vars) {
		t.Fatalf("vars held %#v, read %#v", st.Vars, read.Vars)
	}
	held, err := p.Call(st, t0)
	if err != nil {
		t.Fatal(err)
	}
	fromRead, err := p.Call(read, t0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"t": "2023-12-31T22:00:00Z", "at": time.Date(2023, 12, 31, 22, 0, 0, 0, time.UTC)}
	if !reflect.DeepEqual(held.Input, want) || !reflect.DeepEqual(fromRead.Input, want) {
		t.Fatalf("the second action's input: %#v from memory, %#v from a read; want %#v", held.Input, fromRead.Input, want)
	}
}
