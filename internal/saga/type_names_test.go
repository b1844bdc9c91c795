package saga_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// goTypeWords are how Go and CEL spell types the definition language calls
// list, map, int, timestamp...: a message a user sees holds none of them.
var goTypeWords = []string{"interface", "[]", "map[", "int64", "float64", "google.protobuf", "(string", "dyn)", "a int", "a uint", "null_type"}

func noGoTypes(t *testing.T, what, msg string) {
	t.Helper()
	for _, w := range goTypeWords {
		if strings.Contains(msg, w) {
			t.Errorf("%s: %q names a type as Go or CEL does (%q)", what, msg, w)
		}
	}
}

// Compile-time problems name the type an expression has in the language's
// words, with the right article.
func TestTypeProblemsNameTheLanguagesTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, steps, want string }{
		{"foreach of an int", "  - {id: f, foreach: '${1 + 2}', steps: [{id: a, action: w}]}\n", "foreach needs a list, but ${1 + 2} is an int"},
		{"foreach of a map", "  - {id: f, foreach: '${ {\"a\": 1} }', steps: [{id: a, action: w}]}\n", "is a map"},
		{"condition of a timestamp", "  - {id: a, assert: {if: 'timestamp(\"2026-01-01T00:00:00Z\")'}}\n", "is a timestamp"},
		{"until of a duration", "  - {id: a, wait: {until: '${duration(\"1h\")}'}}\n", "is a duration"},
		{"text of a list", "  - {id: a, action: w, with: {v: 'n ${[1, 2]}'}}\n", "is a list"},
	} {
		_, err := saga.Compile("test.yaml", []byte("saga: m\nsteps:\n"+tc.steps), forks)
		if err == nil {
			t.Errorf("%s: compiled", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %q does not say %q", tc.name, err, tc.want)
		}
		noGoTypes(t, tc.name, err.Error())
	}
}

// A value's type found only when the saga runs is named in the language's
// words too: a foreach over a map an action returned, a condition or an
// until of the wrong type, a map key that is not a string, an action's
// output of no type the language has.
func TestRuntimeTypeErrorsNameTheLanguagesTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, steps string
		out         any
		want        string
	}{
		{"foreach of a map", "  - {id: a, action: w, out: x}\n  - {id: f, foreach: '${vars.x}', steps: [{id: b, action: w}]}\n",
			map[string]any{"k": "v"}, "foreach of step f is a map, not a list"},
		{"foreach of a string", "  - {id: a, action: w, out: x}\n  - {id: f, foreach: '${vars.x}', steps: [{id: b, action: w}]}\n",
			"abc", "foreach of step f is a string, not a list"},
		{"condition of a map", "  - {id: a, action: w, out: x}\n  - {id: b, assert: {if: 'vars.x'}}\n",
			map[string]any{"k": "v"}, "is a map, not a bool"},
		{"until of an int", "  - {id: a, action: w, out: x}\n  - {id: b, wait: {until: '${vars.x}'}}\n",
			int64(3), "is an int, not a timestamp"},
		{"until of a duration", "  - {id: a, action: w, out: x}\n  - {id: b, wait: {until: '${vars.x}'}}\n",
			time.Hour, "is a duration, not a timestamp"},
		{"a map key not a string", "  - {id: a, action: w, out: x}\n  - {id: b, action: w, with: {v: '${ {vars.x: 1} }'}}\n",
			int64(3), "a map key is an int"},
		{"a result that cannot be stored", "  - {id: a, action: w, out: x}\n  - {id: b, action: w, with: {v: '${type(vars.x)}'}}\n",
			int64(3), "the result is a type, which cannot be stored"},
		{"an output of no language type", "  - {id: a, action: w, out: x}\n",
			struct{ N int }{1}, "cannot be stored"},
	} {
		p := mustCompile(t, "saga: m\nsteps:\n"+tc.steps)
		r := drive(t, p, nil, func(c saga.Call) (any, error) {
			if c.Step == "a" {
				return tc.out, nil
			}
			return nil, nil
		})
		if r.st.Failure == nil {
			t.Errorf("%s: no failure (%s)", tc.name, r.st.Status)
			continue
		}
		msg := r.st.Failure.Message
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q does not say %q", tc.name, msg, tc.want)
		}
		noGoTypes(t, tc.name, msg)
		if strings.Contains(msg, "struct") {
			t.Errorf("%s: %q names a Go type", tc.name, msg)
		}
	}
}

// A child saga's input that does not fit is named in the language's words,
// the declared type as the given one.
func TestChildInputProblemsNameTheLanguagesTypes(t *testing.T) {
	t.Parallel()
	_, err := compileFiles(map[string]string{
		"main.yaml": "saga: m\ninput: {m: map}\nsteps:\n  - id: a\n    saga: b.yaml\n    with: {n: 5.5, at: \"${input.m}\", when: \"${duration('1h')}\", u: 7}\n",
		"b.yaml":    "saga: b\ninput: {n: int, at: timestamp, when: timestamp, u: string}\nsteps:\n  - {id: c, action: w}\n",
	}, forks)
	if err == nil {
		t.Fatal("compiled")
	}
	msg := err.Error()
	for _, want := range []string{
		"declares input n an int, but this is a double",
		"declares input at a timestamp, but this is a map",
		"declares input when a timestamp, but this is a duration",
		"declares input u a string, but this is an int",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
	noGoTypes(t, "child input", msg)
	if strings.Contains(msg, "a an ") {
		t.Errorf("%q: two articles", msg)
	}
}
