package lang_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// "secret TYPE" marks an input field secret; the type is TYPE.
func TestParseSecretInput(t *testing.T) {
	t.Parallel()
	src := "saga: x\ninput: {order_id: string, card_number: secret string, extra: secret any}\nsteps: [{id: a, action: w}]\n"
	def, err := lang.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]lang.InputField{}
	for _, f := range def.Input {
		got[f.Name] = f
	}
	for name, want := range map[string]struct {
		typ    string
		secret bool
	}{"order_id": {"string", false}, "card_number": {"string", true}, "extra": {"any", true}} {
		if f := got[name]; f.Type != want.typ || f.Secret != want.secret {
			t.Errorf("%s: type %q secret %v, want %q %v", name, f.Type, f.Secret, want.typ, want.secret)
		}
	}
}

// Misuse of the word is refused with file:line and the field.
func TestParseRefusesSecretMisuse(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ decl, want string }{
		"secret alone":       {"secret", "write secret before the type"},
		"after the type":     {"string secret", `unknown type "string secret"`},
		"twice":              {"secret secret string", `unknown type "secret secret string"`},
		"unknown word":       {"private string", `unknown type "private string"`},
		"secret of no type":  {"secret integer", `unknown type "integer"`},
		"capitalised secret": {"Secret string", `unknown type "Secret string"`},
	} {
		t.Run(name, func(t *testing.T) {
			src := "saga: x\ninput:\n  card: " + tc.decl + "\nsteps: [{id: a, action: w}]\n"
			got := strings.Join(parseProblems(t, src), "\n")
			if !strings.Contains(got, tc.want) || !strings.Contains(got, "test.yaml:3:") || !strings.Contains(got, "input.card") {
				t.Fatalf("problems:\n%s\nwant one at test.yaml:3 on input.card mentioning %q", got, tc.want)
			}
		})
	}
}
