package lang_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// ExampleParse reads a definition into its syntax tree, positions kept;
// Parse checks the shape only (package saga's Compile checks the rest).
func ExampleParse() {
	def, err := lang.Parse("order.yaml", []byte(`saga: order
input: {order_id: string}
timeout: 36h
steps:
  - id: charge
    action: payments.charge
    with: {order_id: "${input.order_id}", note: "order ${input.order_id}"}
    retry: {attempts: 3, backoff: 1s}
    compensate: {action: payments.refund}
  - id: done
    succeed: {output: "${vars}"}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(def.Name, def.Timeout, def.Input[0].Name, def.Input[0].Type)
	for _, s := range def.Steps {
		fmt.Printf("%d:%d %s %s\n", s.Pos.Line, s.Pos.Column, s.ID, s.Kind)
	}
	with := def.Steps[0].With
	for i, k := range with.Keys {
		fmt.Println(k, with.Items[i].Kind == lang.ValueExpr, with.Items[i].Kind == lang.ValueInterp)
	}
	// Output:
	// order 36h0m0s order_id string
	// 5:5 charge action
	// 10:5 done succeed
	// order_id true false
	// note false true
}

// parseProblems parses src and returns its problems, one string each.
func parseProblems(t *testing.T, src string) []string {
	t.Helper()
	_, err := lang.Parse("test.yaml", []byte(src))
	if err == nil {
		return nil
	}
	var de *lang.DefinitionError
	if !errors.As(err, &de) || !errors.Is(err, lang.ErrInvalidDefinition) {
		t.Fatalf("Parse error %T (%v) is not a DefinitionError matching ErrInvalidDefinition", err, err)
	}
	var out []string
	for _, p := range de.Problems {
		out = append(out, p.String())
	}
	return out
}

// Parse alone refuses what is wrong with a definition's shape, each
// problem with file:line, step and field.
func TestParseRefusesBadShapes(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ src, want string }{
		"unknown field":            {"saga: x\nsteps: [{id: a, action: w, retyr: {attempts: 2}}]\n", "test.yaml:2:"},
		"two kinds":                {"saga: x\nsteps: [{id: a, action: w, set: {x: 1}}]\n", "step a"},
		"no kind":                  {"saga: x\nsteps: [{id: a}]\n", "step a"},
		"bad duration":             {"saga: x\nsteps: [{id: a, action: w, timeout: soon}]\n", "timeout"},
		"timeout over 15m":         {"saga: x\nsteps: [{id: a, action: w, timeout: 16m}]\n", "timeout"},
		"saga timeout over 1y":     {"saga: x\ntimeout: 9000h\nsteps: [{id: a, action: w}]\n", "timeout"},
		"second document":          {"saga: x\nsteps: [{id: a, action: w}]\n---\nsaga: y\n", "one YAML document"},
		"merge key":                {"saga: x\nsteps:\n  - id: a\n    action: w\n    with:\n      <<: {a: 1}\n", "merge key"},
		"YAML tag":                 {"saga: x\nsteps: [{id: a, action: !!binary eC55}]\n", "YAML tags"},
		"leading zero":             {"saga: x\nsteps: [{id: a, action: w, with: {zip: 01234}}]\n", "leading zero"},
		"bad action name":          {"saga: x\nsteps: [{id: a, action: \"a b\"}]\n", "not a valid action name"},
		"reserved id":              {"saga: x\nsteps: [{id: pay.compensate, action: w}]\n", "reserved"},
		"empty expression":         {"saga: x\nsteps: [{id: a, set: {x: \"${}\"}}]\n", "step a"},
		"unknown input type":       {"saga: x\ninput: {n: integer}\nsteps: [{id: a, action: w}]\n", "integer"},
		"too deep a value":         {"saga: x\nsteps: [{id: a, set: {x: " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "}}]\n", "nested deeper than 32 levels"},
		"too many steps":           {"saga: x\nsteps:\n" + strings.Repeat("  - {action: w}\n", lang.MaxSteps+1), "over the limit of 500"},
		"definition too large":     {"saga: x\n#" + strings.Repeat("x", lang.MaxDefinitionBytes), "over the limit of 262144"},
		"missing saga name":        {"steps: [{id: a, action: w}]\n", "saga"},
		"steps not a list":         {"saga: x\nsteps: {id: a}\n", "steps"},
		"catch without errors":     {"saga: x\nsteps: [{id: a, action: w, catch: [{next: a}]}]\n", "catch"},
		"integer past uint64":      {"saga: x\nsteps: [{id: a, set: {x: 123456789012345678901234567890}}]\n", "out of range"},
		"integer past int64 below": {"saga: x\nsteps: [{id: a, set: {x: -9223372036854775809}}]\n", "out of range"},
		"retry attempts too many":  {"saga: x\nsteps: [{id: a, action: w, retry: {attempts: 1000}}]\n", "attempts"},
	} {
		t.Run(name, func(t *testing.T) {
			got := parseProblems(t, tc.src)
			if len(got) == 0 {
				t.Fatalf("accepted; want a problem mentioning %q", tc.want)
			}
			joined := strings.Join(got, "\n")
			if !strings.Contains(joined, tc.want) || !strings.HasPrefix(got[0], "test.yaml") {
				t.Fatalf("problems:\n%s\nwant one mentioning %q, each naming the file", joined, tc.want)
			}
		})
	}
}

// Problems come in source order, each once, whatever order they were found in.
func TestNewDefinitionErrorSortsAndDeduplicates(t *testing.T) {
	t.Parallel()
	p := func(line int, msg string) lang.Problem {
		return lang.Problem{File: "f.yaml", Line: line, Column: 1, Message: msg}
	}
	err := lang.NewDefinitionError([]lang.Problem{p(9, "b"), p(2, "a"), p(9, "b"), p(2, "0")})
	if got := err.Error(); got != "f.yaml:2:1: 0\nf.yaml:2:1: a\nf.yaml:9:1: b" {
		t.Fatalf("got %q", got)
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{15 * time.Minute: "15m", 8760 * time.Hour: "8760h", 28 * time.Second: "28s", 90 * time.Second: "1m30s", 1500 * time.Millisecond: "1.5s"} {
		if got := lang.FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
}
