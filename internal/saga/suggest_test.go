package saga_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// TestVarSuggestionIsDeterministic: when two vars are as close to a
// mistyped one, the same file gets the same suggestion every time (the
// first in alphabetical order), not whichever a map yields first.
func TestVarSuggestionIsDeterministic(t *testing.T) {
	t.Parallel()
	src := []byte(`
saga: s
steps:
  - id: one
    action: a.one
    out: ac
  - id: two
    action: a.two
    out: aa
  - id: three
    action: a.three
    with: {x: "${vars.ab}"}
`)
	for range 30 {
		_, err := saga.Compile("s.yaml", src, saga.Options{})
		if err == nil || !strings.Contains(err.Error(), "reads vars.ab, but no step sets it (did you mean vars.aa?)") {
			t.Fatalf("got %v", err)
		}
	}
}
