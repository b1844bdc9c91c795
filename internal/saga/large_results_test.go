package saga_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// With OffloadBytes an expression's result may be as large as an object
// holds (MaxValueBytes), whichever function builds it: the functions that
// build their whole result in one call (join, replace, format, flatten)
// are bounded as + is; past it, the error names the limit that applies.
func TestLargeResultsWithOffloadAreBoundedByTheObjectLimit(t *testing.T) {
	t.Parallel()
	part := strings.Repeat("p", 300<<10) // two make 600 KiB: over a state, under an object
	for _, tt := range []struct {
		name, expr string
		parts      []any
		wantErr    string // "" when the saga succeeds
	}{
		{"plus", "${input.l[0] + input.l[1]}", []any{part, part}, ""},
		{"join", "${input.l.join('')}", []any{part, part}, ""},
		{"replace", "${input.l[0].replace('p', 'pp')}", []any{part}, ""},
		{"format", "${'%s%s'.format([input.l[0], input.l[1]])}", []any{part, part}, ""},
		{"flatten", "${[input.l, input.l].flatten().join('')}", []any{part}, ""},
		{"join past an object", "${[input.l[0], input.l[0], input.l[0], input.l[0]].join('')}", []any{strings.Repeat("q", 9<<20)}, fmt.Sprint(saga.MaxValueBytes)},
		{"plus past an object", "${input.l[0] + input.l[0] + input.l[0] + input.l[0]}", []any{strings.Repeat("q", 9<<20)}, fmt.Sprint(saga.MaxValueBytes)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustCompile(t, "saga: big\ninput: {l: list}\nsteps:\n  - id: make\n    set: {y: \""+tt.expr+"\"}\n")
			in, err := p.CheckInputWithin(map[string]any{"l": tt.parts}, offloadBytes)
			if err != nil {
				t.Fatal(err)
			}
			st := &saga.State{}
			ev := saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "o-1", Input: in, StoreLimit: saga.MaxStateBytes, OffloadBytes: offloadBytes}
			if err := p.Advance(st, ev); err != nil {
				t.Fatal(err)
			}
			if tt.wantErr == "" {
				if st.Status != durable.StatusSucceeded {
					t.Fatalf("status %s (failure %v), want succeeded", st.Status, st.Failure)
				}
				return
			}
			if st.Failure == nil || !strings.Contains(st.Failure.Message, tt.wantErr) {
				t.Fatalf("failure %v, want one naming the limit %s", st.Failure, tt.wantErr)
			}
		})
	}
}

// A foreach over a list of large values launches each child with its
// element, however large the fork step accepted it: an element is read
// again from the list's expression under the same limit.
func TestForeachLaunchesLargeElementsWithOffload(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `
saga: docs
input: {docs: list}
steps:
  - id: each
    foreach: "${input.docs}"
    as: doc
    steps:
      - id: use
        action: svc.use
        with: {doc: "${doc}"}
`)
	doc := strings.Repeat("d", 500<<10)
	in, err := p.CheckInputWithin(map[string]any{"docs": []any{doc, "small"}}, offloadBytes)
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "o-1", Input: in, StoreLimit: saga.MaxStateBytes, OffloadBytes: offloadBytes}); err != nil {
		t.Fatal(err)
	}
	if st.Status.Final() {
		t.Fatalf("status %s (failure %v), want it waiting on its children", st.Status, st.Failure)
	}
	_, cs, err := p.Launch(st, 0)
	if err != nil {
		t.Fatalf("launch of the large element: %v", err)
	}
	if got := cs.Scope["doc"]; got != doc {
		t.Fatalf("child 0 got doc %.20v, want the 500 KiB element", got)
	}
}
