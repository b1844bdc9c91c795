package lang_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// compensate: none says on purpose that an action needs no undo; the step
// has no compensation, and is marked so.
func TestParseCompensateNone(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"plain":  "saga: x\nsteps: [{id: a, action: w, compensate: none}]\n",
		"quoted": "saga: x\nsteps: [{id: a, action: w, compensate: \"none\"}]\n",
		"JSON":   `{"saga": "x", "steps": [{"id": "a", "action": "w", "compensate": "none"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			def, err := lang.Parse("test.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if s := def.Steps[0]; !s.NoCompensation || s.Compensate != nil {
				t.Fatalf("NoCompensation %v, Compensate %v: want true, nil", s.NoCompensation, s.Compensate)
			}
		})
	}
	def, err := lang.Parse("test.yaml", []byte("saga: x\nsteps: [{id: a, action: w, compensate: {action: u}}, {id: b, action: w}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if def.Steps[0].NoCompensation || def.Steps[1].NoCompensation {
		t.Fatal("a step with a compensation, or without compensate, is marked compensate: none")
	}
}

// Anything else than a mapping or none is refused with file:line, step and
// field, saying what may stand there.
func TestParseRefusesCompensateThatIsNotNone(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ value, want string }{
		"typo":         {"nnoe", "or none to say it needs no undo"},
		"capitalised":  {"None", "did you mean none?"},
		"false":        {"false", "or none"},
		"null":         {"null", "or none"},
		"empty":        {"", "or none"},
		"a list":       {"[none]", "must be a mapping"},
		"on a set":     {"none", "only action steps have compensate"},
		"action named": {"payments.refund", "must be a mapping {action: NAME"},
	} {
		t.Run(name, func(t *testing.T) {
			step := "{id: a, action: w, compensate: " + tc.value + "}"
			if name == "on a set" {
				step = "{id: a, set: {x: 1}, compensate: none}"
			}
			got := strings.Join(parseProblems(t, "saga: x\nsteps: ["+step+"]\n"), "\n")
			if !strings.Contains(got, tc.want) || !strings.HasPrefix(got, "test.yaml:2:") || !strings.Contains(got, "step a: compensate") {
				t.Fatalf("problems:\n%s\nwant one at test.yaml:2, step a, compensate, mentioning %q", got, tc.want)
			}
		})
	}
}
