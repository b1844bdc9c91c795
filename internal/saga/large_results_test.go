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
