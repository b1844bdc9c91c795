package saga_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// refused compiles src and expects a DefinitionError whose text holds every
// one of want (file:line:column, step, field and message parts).
func refused(t *testing.T, src string, opts saga.Options, want ...string) {
	t.Helper()
	_, err := saga.Compile("test.yaml", []byte(src), opts)
	if !errors.Is(err, lang.ErrInvalidDefinition) {
		t.Fatalf("compiled, want a refusal mentioning %q\n%s", want, src)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}

func accepted(t *testing.T, src string, opts saga.Options) *saga.Plan {
	t.Helper()
	p, err := saga.Compile("test.yaml", []byte(src), opts)
	if err != nil {
		t.Fatalf("refused a valid definition: %v\n%s", err, src)
	}
	return p
}

// An empty or blank expression is refused wherever an expression can stand:
// before, an empty condition matched always (switch) or panicked (assert).
func TestEmptyExpressionsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string
	}{
		{"switch if ${}", `saga: x
steps:
  - id: a
    switch:
      - {if: "${}", next: b}
      - {default: b}
  - id: b
    action: work
`, []string{"test.yaml:5:", "step a: switch[0].if: ", "empty expression"}},
		{"switch if blank ${ }", `saga: x
steps:
  - id: a
    switch:
      - {if: "${  }", next: b}
      - {default: b}
  - id: b
    action: work
`, []string{"test.yaml:5:", "step a: switch[0].if: ", "empty expression"}},
		{"switch if blank text", `saga: x
steps:
  - id: a
    switch:
      - {if: "   ", next: b}
      - {default: b}
  - id: b
    action: work
`, []string{"test.yaml:5:", "step a: switch[0].if: ", "empty expression"}},
		{"assert if ${}", `saga: x
steps:
  - id: a
    action: work
  - id: b
    assert: {if: "${}"}
`, []string{"test.yaml:6:", "step b: assert.if: ", "empty expression"}},
		{"with ${}", `saga: x
steps:
  - id: a
    action: work
    with: {v: "${}"}
`, []string{"test.yaml:5:", "step a: with.v: ", "empty expression"}},
		{"set ${ }", `saga: x
steps:
  - id: a
    set: {v: "${ }"}
  - id: b
    action: work
`, []string{"test.yaml:4:", "step a: set.v: ", "empty expression"}},
		{"succeed ${}", `saga: x
steps:
  - id: a
    action: work
  - id: b
    succeed: {output: "${}"}
`, []string{"test.yaml:6:", "step b: succeed.output: ", "empty expression"}},
		{"interpolation ${}", `saga: x
steps:
  - id: a
    action: work
    with: {v: "a ${} b"}
`, []string{"test.yaml:5:", "step a: with.v: ", "empty"}},
		{"interpolation blank", `saga: x
steps:
  - id: a
    action: work
    with: {v: "a ${   } b"}
`, []string{"test.yaml:5:", "step a: with.v: ", "empty"}},
		{"compensation with ${}", `saga: x
steps:
  - id: a
    action: work
    compensate: {action: undo, with: {v: ["${}"]}}
`, []string{"test.yaml:5:", "step a: compensate.with.v[0]: ", "empty expression"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { refused(t, tt.src, saga.Options{}, tt.want...) })
	}
}

// A saga timeout is at most lang.MaxSagaTimeout: past about 236 years it wrapped
// to a deadline in the past.
func TestSagaTimeoutBounded(t *testing.T) {
	t.Parallel()
	for _, d := range []string{"8761h", "2200000h"} {
		refused(t, "saga: x\ntimeout: "+d+"\nsteps: [{id: a, action: work}]\n", saga.Options{},
			"test.yaml:2:", "timeout: ", "longer than the limit of 8760h (one year)")
	}
	accepted(t, "saga: x\ntimeout: 8760h\nsteps: [{id: a, action: work}]\n", saga.Options{})
}

// An action without out, then a set, then a read of the set var: the var
// flow goes on past the step that writes nothing.
func TestVarFlowPastStepsThatWriteNothing(t *testing.T) {
	t.Parallel()
	accepted(t, `saga: x
steps:
  - id: a
    action: work
  - id: b
    set: {x: 1}
  - id: c
    action: work
    with: {v: "${vars.x}"}
`, saga.Options{})
	accepted(t, `saga: x
steps:
  - id: a
    action: work
  - id: pick
    switch: [{default: b}]
  - id: b
    set: {x: 1}
  - id: c
    assert: {if: "vars.x == 1"}
`, saga.Options{})
}

// A compensation may read only the vars that surely exist when it runs:
// those written on every path up to and including its own step.
func TestCompensationReads(t *testing.T) {
	t.Parallel()
	refused(t, `saga: x
steps:
  - id: a
    action: work
    compensate: {action: undo, with: {id: "${vars.later.id}"}}
  - id: b
    action: work
    out: later
`, saga.Options{}, "test.yaml:5:", "step a: compensate.with.id: ", "reads vars.later", "when this compensation runs")

	// Written on one branch only: the compensation of c may run without it.
	refused(t, `saga: x
input: {big: bool}
steps:
  - id: pick
    switch:
      - {if: "input.big", next: flag}
      - {default: c}
  - id: flag
    set: {flagged: true}
  - id: c
    action: work
    compensate: {action: undo, with: {f: "${vars.flagged}"}}
`, saga.Options{}, "test.yaml:12:", "step c: compensate.with.f: ", "reads vars.flagged")

	// Its own out, and vars written on every path before it, are fine.
	accepted(t, `saga: x
input: {big: bool}
steps:
  - id: first
    action: work
    out: one
  - id: pick
    switch:
      - {if: "input.big", next: flag}
      - {default: c}
  - id: flag
    set: {flagged: true}
  - id: c
    action: work
    out: two
    compensate: {action: undo, with: {a: "${vars.one}", b: "${vars.two}", f: "${has(vars.flagged)}"}}
`, saga.Options{})
}

func TestCatchRefusals(t *testing.T) {
	t.Parallel()
	refused(t, `saga: x
steps:
  - id: a
    action: work
    catch: [{errors: ["*"], next: a}]
`, saga.Options{}, "test.yaml:5:", "step a: catch[0].next: ", "its own step", "retry")

	for _, typ := range []string{lang.ErrorTypeStateTooLarge, lang.ErrorTypeStepLimit, lang.ErrorTypeVisitLimit} {
		refused(t, `saga: x
steps:
  - id: a
    action: work
    catch: [{errors: [Timeout, `+typ+`], next: b}]
  - id: b
    action: work
`, saga.Options{}, "test.yaml:5:", "step a: catch[0].errors: ", typ, "always compensates")
	}
}

func TestMaxStepTimeout(t *testing.T) {
	t.Parallel()
	opts := saga.Options{MaxStepTimeout: saga.StepTimeoutLimit(30 * time.Second)}
	refused(t, `saga: x
steps:
  - id: a
    action: work
    timeout: 28s
`, opts, "test.yaml:5:", "step a: timeout: ", "27s", "function", "2s", "1s")
	refused(t, `saga: x
steps:
  - id: a
    action: work
    compensate: {action: undo, timeout: 1m}
`, opts, "test.yaml:5:", "step a: compensate.timeout: ", "27s")
	ok := `saga: x
steps:
  - id: a
    action: work
    timeout: 27s
    compensate: {action: undo, timeout: 15m}
`
	refused(t, ok, opts, "compensate.timeout")
	ok = strings.Replace(ok, "15m", "1s", 1)
	accepted(t, ok, opts)
	accepted(t, strings.Replace(ok, "27s", "15m", 1), saga.Options{})
}

func TestYAMLDocumentShape(t *testing.T) {
	t.Parallel()
	refused(t, "saga: x\nsteps: [{id: a, action: work}]\n---\nsaga: y\nsteps: [{id: b, action: work}]\n", saga.Options{},
		"test.yaml:3:", "one YAML document")
	refused(t, "saga: x\nsteps:\n  - id: a\n    action: work\n    with:\n      <<: {a: 1}\n      b: 2\n", saga.Options{},
		"test.yaml:6:", "merge key")
	accepted(t, "---\nsaga: x\nsteps: [{id: a, action: work}]\n", saga.Options{})
	accepted(t, "saga: x\nsteps: [{id: a, action: work, with: {\"<<\": 1}}]\n", saga.Options{})
	// Tags are refused (they were silently dropped: !!binary eC55 named the
	// action eC55); an integer with a leading zero is ambiguous (YAML 1.1
	// reads 01234 as octal) and must be written plainly or quoted.
	refused(t, "saga: x\nsteps: [{id: a, action: !!binary eC55}]\n", saga.Options{}, "test.yaml:2:", "YAML tags")
	refused(t, "saga: x\nsteps: [{id: a, action: work, with: !!set {a, b}}]\n", saga.Options{}, "test.yaml:2:", "YAML tags")
	refused(t, "saga: x\nsteps: [{id: a, action: work, with: {zip: 01234}}]\n", saga.Options{}, "test.yaml:2:", "leading zero")
	accepted(t, "saga: x\nsteps: [{id: a, action: work, with: {zip: \"01234\", n: 0, m: -5}}]\n", saga.Options{})
	// A plain date is text, as the user wrote it.
	p, err := saga.Compile("test.yaml", []byte("saga: x\nsteps: [{id: a, succeed: {output: {d: 2001-12-14}}}]\n"), saga.Options{})
	if err != nil {
		t.Fatalf("a plain date refused: %v", err)
	}
	_ = p
}

func TestActionNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{`" "`, `"lambda:"`, `"a b"`, `"lambda: fn"`, `"lambda:my fn"`, `"-x"`, `"x:y"`, `"lambda:arn:aws:s3:::bucket"`} {
		t.Run(name, func(t *testing.T) {
			refused(t, "saga: x\nsteps:\n  - id: a\n    action: "+name+"\n", saga.Options{}, "test.yaml:4:", "step a: action: ", "not a valid action name")
			refused(t, "saga: x\nsteps:\n  - id: a\n    action: work\n    compensate: {action: "+name+"}\n", saga.Options{}, "test.yaml:5:", "step a: compensate.action: ", "not a valid action name")
		})
	}
	for _, name := range []string{"inventory.reserve", "svc/charge-v2", "lambda:my-function", "lambda:my_function:prod",
		"lambda:123456789012:function:my-function", "lambda:arn:aws:lambda:us-west-2:123456789012:function:my-function",
		"lambda:arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:fn:$LATEST"} {
		accepted(t, "saga: x\nsteps:\n  - id: a\n    action: "+name+"\n", saga.Options{})
	}
}

func TestCompensateSuffixReserved(t *testing.T) {
	t.Parallel()
	refused(t, "saga: x\nsteps:\n  - id: pay.compensate\n    action: work\n", saga.Options{},
		"test.yaml:3:", "id: ", "reserved")
}

// The same definition gives the same problems, in the same order, on every
// compile, though suggestions are drawn from a map.
func TestProblemsDeterministic(t *testing.T) {
	t.Parallel()
	src := `saga: x
steps:
  - id: stepa
    action: work
    next: stepx
    with: {v: "${vars.vy}"}
  - id: stepb
    action: work
    out: va
    catch: [{errors: ["*"], next: stepz}]
  - id: stepc
    action: work
    out: vb
    with: {v: "${vars.vz}"}
  - id: pick
    switch: [{if: "vars.vq == 1", next: stepy}, {default: stepw}]
`
	var first string
	for i := range 50 {
		_, err := saga.Compile("test.yaml", []byte(src), saga.Options{})
		if err == nil {
			t.Fatal("compiled")
		}
		if i == 0 {
			first = err.Error()
			if !strings.Contains(first, "did you mean") {
				t.Fatalf("no suggestion:\n%s", first)
			}
			continue
		}
		if err.Error() != first {
			t.Fatalf("compile %d differs:\n%s\n--- first\n%s", i, err, first)
		}
	}
}
