package saga_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
)

// The size guard evaluates a call's arguments before the call; it must not
// make the call evaluate them again, or each guarded call nested in
// another doubles the work: 30 chained replaces ran for 50 s and then hit
// the cost limit. Evaluated once each, they finish and give the right text.
func TestGuardedCallsNestedDoNotRepeatTheirArguments(t *testing.T) {
	t.Parallel()
	expr := "input.s" + strings.Repeat(".replace('a', 'b')", 30) + ".replace('b', 'c')" +
		" + [input.s, input.s].map(x, x" + strings.Repeat(".replace('a', 'b')", 20) + ").join('-')"
	p := mustCompile(t, "saga: g\ninput: {s: string}\nsteps:\n  - {id: a, succeed: {output: \""+"${"+expr+"}\"}}\n")
	r := drive(t, p, map[string]any{"s": "banana"}, nil)
	if r.st.Status != durable.StatusSucceeded || r.st.Output != "ccncncbbnbnb-bbnbnb" {
		t.Fatalf("status %s output %v failure %+v", r.st.Status, r.st.Output, r.st.Failure)
	}
}
