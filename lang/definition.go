package lang

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"go.yaml.in/yaml/v3"
)

// Limits on definitions; a definition over any of them is rejected by validation.
const (
	MaxDefinitionBytes = 256 << 10
	MaxSteps           = 500
	MaxExpressionBytes = 4096
	MaxValueDepth      = 32
	MaxCatchClauses    = 20
	MaxSwitchCases     = 100
	MaxRetryAttempts   = 100
)

// StepKind is the kind of a step; each step has exactly one.
type StepKind string

const (
	KindAction  StepKind = "action"
	KindSet     StepKind = "set"
	KindSwitch  StepKind = "switch"
	KindAssert  StepKind = "assert"
	KindFail    StepKind = "fail"
	KindSucceed StepKind = "succeed"
)

// StepKinds lists every step kind, in documentation order.
func StepKinds() []StepKind {
	return []StepKind{KindAction, KindSet, KindSwitch, KindAssert, KindFail, KindSucceed}
}

// InputTypes lists the type names an input field may declare.
func InputTypes() []string {
	return []string{"string", "int", "uint", "double", "bool", "bytes", "list", "map", "timestamp", "duration", "any"}
}

// Pos is a position in a definition's source, 1-based.
type Pos struct{ Line, Column int }

// Definition is a parsed saga definition. It keeps source positions so that
// validation can point at the offending line.
type Definition struct {
	File    string
	Source  []byte
	Name    string
	Input   []InputField // nil when the definition declares no input
	Timeout time.Duration
	Steps   []*Step

	pos map[string]Pos // saga-level field -> position
}

// InputField is one declared input field.
type InputField struct {
	Name string
	Type string
	Pos  Pos
}

// Step is one step of a definition. Exactly one of the kind-specific groups
// of fields is set, according to Kind.
type Step struct {
	ID    string
	Kind  StepKind
	Pos   Pos
	Next  string
	Catch []Catch

	// action
	Action     string
	With       *Value
	Out        string
	Retry      *RetryPolicy
	Timeout    time.Duration
	Compensate *Compensation

	Set     []Assignment // set
	Switch  []Case       // switch
	Assert  *Assertion   // assert
	Fail    *Failure     // fail
	Succeed *Value       // succeed: the output, nil for none

	pos map[string]Pos // field path -> position
}

// FieldPos returns where field (a top-level field of the step, such as
// "timeout" or "with") stands in the source, or the step's own position
// when the field is absent.
func (s *Step) FieldPos(field string) Pos {
	if p, ok := s.pos[field]; ok {
		return p
	}
	return s.Pos
}

// Catch routes a failure whose error type is listed to another step.
type Catch struct {
	Errors []string // error types; "*" matches any
	Next   string
	Pos    Pos
}

// Compensation is the action that undoes a completed step.
type Compensation struct {
	Action  string
	With    *Value
	Retry   *RetryPolicy
	Timeout time.Duration
	Pos     Pos

	TimeoutPos Pos // of the timeout field, when given
}

// Assignment is one name: value pair of a set step.
type Assignment struct {
	Name  string
	Value *Value
}

// Case is one branch of a switch: when If holds (or Default), go to Next.
type Case struct {
	If      string
	Default bool
	Next    string
	Pos     Pos
}

// Assertion stops the saga with an error when If is false.
type Assertion struct {
	If      string
	Message string
	Error   string
	Pos     Pos
}

// Failure is a fail step's error.
type Failure struct {
	Error   string
	Message string
}

// RetryPolicy says how often and how patiently a failing action is retried.
type RetryPolicy struct {
	Attempts   int
	Backoff    time.Duration
	MaxBackoff time.Duration
	Jitter     bool
	Permanent  []string // error types never retried
}

// Default retry policies for actions and for compensations. Compensations
// are retried longer: giving up parks the saga for an operator.
var (
	DefaultRetry           = RetryPolicy{Attempts: 3, Backoff: time.Second, MaxBackoff: 30 * time.Second, Jitter: true}
	DefaultCompensateRetry = RetryPolicy{Attempts: 10, Backoff: time.Second, MaxBackoff: 5 * time.Minute, Jitter: true}
)

// ValueKind tells what a Value node holds.
type ValueKind uint8

const (
	ValueLiteral ValueKind = iota // a YAML scalar, or a template string without ${}
	ValueExpr                     // exactly "${expr}": keeps the expression's type
	ValueInterp                   // text with ${...} parts: always a string
	ValueMap
	ValueList
)

// Value is a value template from a definition: literals, CEL expressions,
// interpolated strings, and maps and lists of them.
type Value struct {
	Kind    ValueKind
	Pos     Pos
	Literal any          // ValueLiteral
	Expr    string       // ValueExpr
	Parts   []InterpPart // ValueInterp
	Keys    []string     // ValueMap, in source order
	Items   []*Value     // ValueMap (parallel to Keys) and ValueList
	Column  int          // column of the expression text within the line, for CEL positions
}

// InterpPart is literal text or an expression within an interpolated string.
type InterpPart struct {
	Text string
	Expr string
}

var (
	namePattern  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,79}$`)
	identPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	// goActionPattern: the name of an action registered in a Registry.
	goActionPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_./-]{0,127}$`)
	// lambdaFunctionPattern: what Lambda Invoke takes as FunctionName (a
	// name, a partial ARN or an ARN, with an optional version or alias).
	lambdaFunctionPattern = regexp.MustCompile(`^(arn:aws[a-zA-Z-]*:lambda:)?([a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]:)?([0-9]{12}:)?(function:)?[a-zA-Z0-9_-]{1,64}(:(\$LATEST|[a-zA-Z0-9_-]{1,128}))?$`)
)

// lambdaActionPrefix marks an action run by Lambda Invoke (see package
// lambdaaction, which strips it and invokes the rest as the function name).
const lambdaActionPrefix = "lambda:"

// ValidActionName reports whether name can name an action in a definition:
// either a Go action (a letter, then letters, digits, '_', '.', '-' or '/',
// at most 128), or "lambda:" followed by a Lambda function name, partial ARN
// or ARN, with an optional :version or :alias.
func ValidActionName(name string) bool {
	if fn, ok := strings.CutPrefix(name, lambdaActionPrefix); ok {
		return len(fn) <= 170 && lambdaFunctionPattern.MatchString(fn)
	}
	return goActionPattern.MatchString(name)
}

// Parse reads a YAML or JSON saga definition. It checks the shape of the
// document (known fields, their types, durations, limits); Compile checks the
// rest. All problems are reported at once in a *DefinitionError.
func Parse(file string, src []byte) (*Definition, error) {
	p := &parser{file: file}
	def := p.parse(src)
	if len(p.problems) > 0 {
		return def, NewDefinitionError(p.problems)
	}
	return def, nil
}

type parser struct {
	file     string
	problems []Problem
	step     string
}

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	pr := Problem{File: p.file, Step: p.step, Field: field, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		pr.Line, pr.Column = n.Line, n.Column
	}
	p.problems = append(p.problems, pr)
}

func (p *parser) parse(src []byte) (def *Definition) {
	def = &Definition{File: p.file, Source: src, pos: map[string]Pos{}}
	defer func() {
		// The YAML library is not ours; whatever it does, the caller gets an error, not a panic.
		if r := recover(); r != nil {
			p.errorf(nil, "", "cannot parse definition: %v", r)
		}
	}()
	if len(src) > MaxDefinitionBytes {
		p.errorf(nil, "", "definition is %d bytes, over the limit of %d", len(src), MaxDefinitionBytes)
		return def
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		p.problems = append(p.problems, yamlProblem(p.file, err))
		return def
	}
	// The decoder reads one document; a second one would be ignored.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		p.errorf(&extra, "", "a second YAML document starts here: a definition is one YAML document")
	} else if err != io.EOF {
		p.problems = append(p.problems, yamlProblem(p.file, err))
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.errorf(nil, "", "definition is empty")
		return def
	}
	root := doc.Content[0]
	if !p.checkNoAliases(root) {
		return def
	}
	if root.Kind != yaml.MappingNode {
		p.errorf(root, "", "definition must be a mapping with saga, input, timeout and steps")
		return def
	}
	var stepsNode *yaml.Node
	p.eachField(root, "", []string{"saga", "input", "timeout", "steps"}, func(key string, k, v *yaml.Node) {
		def.pos[key] = Pos{k.Line, k.Column}
		switch key {
		case "saga":
			def.Name = p.str(v, "saga")
			if def.Name != "" && !namePattern.MatchString(def.Name) {
				p.errorf(v, "saga", "name %q must start with a letter and hold only letters, digits, '_', '.' and '-' (at most 80)", def.Name)
			}
		case "input":
			def.Input = p.input(v)
		case "timeout":
			// Unbounded, a deadline far enough away wraps when stored as Unix
			// nanoseconds and lands in the past.
			def.Timeout = p.duration(v, "timeout", 0)
			if def.Timeout > MaxSagaTimeout {
				p.errorf(v, "timeout", "%s is longer than the limit of %s (one year)", v.Value, FormatDuration(MaxSagaTimeout))
				def.Timeout = 0
			}
		case "steps":
			stepsNode = v
		}
	})
	if _, ok := def.pos["saga"]; !ok {
		p.errorf(root, "saga", "missing: every definition needs a saga name")
	}
	if stepsNode == nil {
		p.errorf(root, "steps", "missing: a saga needs at least one step")
		return def
	}
	if stepsNode.Kind != yaml.SequenceNode || len(stepsNode.Content) == 0 {
		p.errorf(stepsNode, "steps", "must be a non-empty list of steps")
		return def
	}
	if len(stepsNode.Content) > MaxSteps {
		p.errorf(stepsNode, "steps", "%d steps, over the limit of %d", len(stepsNode.Content), MaxSteps)
		return def
	}
	for i, sn := range stepsNode.Content {
		def.Steps = append(def.Steps, p.stepNode(i, sn))
	}
	return def
}

func yamlProblem(file string, err error) Problem {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	pr := Problem{File: file, Message: "not valid YAML or JSON: " + msg}
	// yaml.v3 says "line N: ..." for syntax errors.
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ":"); ok {
			if line, err := strconv.Atoi(n); err == nil {
				pr.Line, pr.Column = line, 1
				pr.Message = "not valid YAML or JSON:" + tail
			}
		}
	}
	return pr
}

// checkNoAliases rejects anchors and aliases (they make documents that
// expand exponentially, and a definition never needs them) and the merge key.
func (p *parser) checkNoAliases(n *yaml.Node) bool {
	ok := true
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if !ok {
			return
		}
		if depth > MaxValueDepth+8 {
			p.errorf(n, "", "nested deeper than %d levels", MaxValueDepth)
			ok = false
			return
		}
		if n.Kind == yaml.AliasNode || n.Anchor != "" {
			p.errorf(n, "", "YAML anchors and aliases are not supported")
			ok = false
			return
		}
		if n.Style&yaml.TaggedStyle != 0 {
			p.errorf(n, "", "YAML tags (%s) are not supported: write the value plainly, or quote it for text", n.Tag)
			ok = false
			return
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i < len(n.Content); i += 2 {
				if k := n.Content[i]; k.ShortTag() == "!!merge" {
					// The YAML library would keep "<<" as a literal key.
					p.errorf(k, "", "the merge key << is not supported: write the fields out (quote it, \"<<\", for a key of that name)")
					ok = false
					return
				}
			}
		}
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	return ok
}

// eachField visits the fields of a mapping, reporting unknown and duplicate keys.
func (p *parser) eachField(n *yaml.Node, prefix string, known []string, fn func(key string, k, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, strings.TrimSuffix(prefix, "."), "must be a mapping")
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, strings.TrimSuffix(prefix, "."), "keys must be strings")
			continue
		}
		if seen[key] {
			p.errorf(k, prefix+key, "duplicate field")
			continue
		}
		seen[key] = true
		if known != nil && !slices.Contains(known, key) {
			p.errorf(k, prefix+key, "unknown field (expected one of %s)", strings.Join(known, ", "))
			continue
		}
		fn(key, k, v)
	}
}

func (p *parser) str(n *yaml.Node, field string) string {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.errorf(n, field, "must be a string")
		return ""
	}
	if n.Value == "" {
		p.errorf(n, field, "must not be empty")
	}
	return n.Value
}

func (p *parser) ident(n *yaml.Node, field string) string {
	s := p.str(n, field)
	if s != "" && !identPattern.MatchString(s) {
		p.errorf(n, field, "%q is not a valid name (letters, digits and '_', starting with a letter, at most 64)", s)
	}
	return s
}

func (p *parser) stepID(n *yaml.Node, field string) string {
	s := p.str(n, field)
	if s != "" && !namePattern.MatchString(s) {
		p.errorf(n, field, "%q is not a valid step id (a letter, then letters, digits, '_', '.' or '-', at most 80)", s)
	}
	return s
}

func (p *parser) action(n *yaml.Node, field string) string {
	s := p.str(n, field)
	if s != "" && !ValidActionName(s) {
		p.errorf(n, field, "not a valid action name: a Go action is a letter, then letters, digits, '_', '.', '-' or '/' (at most 128); a Lambda action is lambda:FUNCTION, with a function name, partial ARN or ARN and an optional :version or :alias")
	}
	return s
}

func (p *parser) duration(n *yaml.Node, field string, max time.Duration) time.Duration {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		p.errorf(n, field, "must be a duration such as 500ms, 30s, 5m or 24h")
		return 0
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil || d <= 0 {
		p.errorf(n, field, "%q is not a positive duration (such as 500ms, 30s, 5m or 24h)", n.Value)
		return 0
	}
	if max > 0 && d > max {
		p.errorf(n, field, "%s is longer than the limit of %s", n.Value, FormatDuration(max))
	}
	return d
}

// FormatDuration writes d as definitions and their messages do, without
// zero minutes and seconds: 8760h, 15m, 28s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (p *parser) input(n *yaml.Node) []InputField {
	fields := []InputField{}
	p.eachField(n, "input.", nil, func(key string, k, v *yaml.Node) {
		if !identPattern.MatchString(key) {
			p.errorf(k, "input."+key, "%q is not a valid field name", key)
			return
		}
		t := ""
		if v.Kind == yaml.ScalarNode {
			t = v.Value
		}
		if !slices.Contains(InputTypes(), t) {
			p.errorf(v, "input."+key, "unknown type %q (expected one of %s)", t, strings.Join(InputTypes(), ", "))
			return
		}
		fields = append(fields, InputField{Name: key, Type: t, Pos: Pos{k.Line, k.Column}})
	})
	return fields
}

// compensateSuffix turns a step id into the name of its compensation; no
// step id may end with it, so the two cannot be confused.
const compensateSuffix = ".compensate"

var stepFields = []string{"id", "next", "catch", "action", "with", "out", "retry", "timeout", "compensate", "set", "switch", "assert", "fail", "succeed"}

func (p *parser) stepNode(i int, n *yaml.Node) *Step {
	s := &Step{Pos: Pos{n.Line, n.Column}, pos: map[string]Pos{}}
	p.step = fmt.Sprintf("#%d", i+1)
	defer func() { p.step = "" }()
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "", "must be a mapping with an id and one of %s", kindList())
		return s
	}
	// The id first, so that every other problem names the step.
	for j := 0; j+1 < len(n.Content); j += 2 {
		if n.Content[j].Value == "id" {
			s.ID = p.stepID(n.Content[j+1], "id")
			if s.ID != "" {
				p.step = s.ID
			}
			if strings.HasSuffix(s.ID, compensateSuffix) {
				p.errorf(n.Content[j+1], "id", "the suffix %s is reserved: STEP%s names the compensation of STEP (in sagactl run --fail and in idempotency keys)", compensateSuffix, compensateSuffix)
			}
		}
	}
	if s.ID == "" && !p.hasKey(n, "id") {
		p.errorf(n, "id", "missing: every step needs an id")
	}
	var kinds []string
	fields := map[string]*yaml.Node{}
	p.eachField(n, "", stepFields, func(key string, k, v *yaml.Node) {
		s.pos[key] = Pos{k.Line, k.Column}
		fields[key] = v
		if slices.Contains(StepKinds(), StepKind(key)) {
			kinds = append(kinds, key)
		}
	})
	switch len(kinds) {
	case 0:
		p.errorf(n, "", "has no kind: give it one of %s", kindList())
		return s
	case 1:
		s.Kind = StepKind(kinds[0])
	default:
		p.errorf(n, "", "has %d kinds (%s): a step has exactly one", len(kinds), strings.Join(kinds, ", "))
		return s
	}
	if s.Kind != KindAction {
		for _, f := range []string{"with", "out", "retry", "timeout", "compensate"} {
			if v, ok := fields[f]; ok {
				p.errorf(v, f, "only action steps have %s", f)
			}
		}
	}
	if v, ok := fields["next"]; ok {
		if s.Kind == KindSwitch || s.Kind == KindFail || s.Kind == KindSucceed {
			p.errorf(v, "next", "a %s step ends its path or picks the next step itself: next is not allowed", s.Kind)
		} else {
			s.Next = p.stepID(v, "next")
		}
	}
	if v, ok := fields["catch"]; ok {
		if s.Kind != KindAction && s.Kind != KindAssert {
			p.errorf(v, "catch", "only action and assert steps can fail with an error to catch")
		} else {
			s.Catch = p.catches(v)
		}
	}
	kn := fields[string(s.Kind)]
	switch s.Kind {
	case KindAction:
		s.Action = p.action(kn, "action")
		if v, ok := fields["with"]; ok {
			s.With = p.value(v, "with", 0)
		}
		if v, ok := fields["out"]; ok {
			s.Out = p.ident(v, "out")
		}
		if v, ok := fields["retry"]; ok {
			s.Retry = p.retry(v, "retry")
		}
		if v, ok := fields["timeout"]; ok {
			s.Timeout = p.duration(v, "timeout", durable.MaxDelay)
		}
		if v, ok := fields["compensate"]; ok {
			s.Compensate = p.compensation(v)
		}
	case KindSet:
		p.eachField(kn, "set.", nil, func(key string, k, v *yaml.Node) {
			if !identPattern.MatchString(key) {
				p.errorf(k, "set."+key, "%q is not a valid variable name", key)
				return
			}
			s.Set = append(s.Set, Assignment{Name: key, Value: p.value(v, "set."+key, 0)})
		})
		if kn.Kind == yaml.MappingNode && len(kn.Content) == 0 {
			p.errorf(kn, "set", "assigns nothing")
		}
	case KindSwitch:
		s.Switch = p.cases(kn)
	case KindAssert:
		a := &Assertion{Pos: Pos{kn.Line, kn.Column}, Error: ErrorTypeAssertion}
		p.eachField(kn, "assert.", []string{"if", "message", "error"}, func(key string, k, v *yaml.Node) {
			switch key {
			case "if":
				a.If = p.condition(v, "assert.if")
				a.Pos = Pos{v.Line, v.Column + quoteOffset(v)}
			case "message":
				a.Message = p.str(v, "assert.message")
			case "error":
				a.Error = p.str(v, "assert.error")
			}
		})
		if a.If == "" && !p.hasKey(kn, "if") {
			p.errorf(kn, "assert.if", "missing: an assert needs a condition")
		}
		s.Assert = a
	case KindFail:
		f := &Failure{}
		p.eachField(kn, "fail.", []string{"error", "message"}, func(key string, k, v *yaml.Node) {
			if key == "error" {
				f.Error = p.str(v, "fail.error")
			} else {
				f.Message = p.str(v, "fail.message")
			}
		})
		if f.Error == "" && !p.hasKey(kn, "error") {
			p.errorf(kn, "fail.error", "missing: a fail step names its error type")
		}
		s.Fail = f
	case KindSucceed:
		if kn.Kind == yaml.ScalarNode && kn.ShortTag() == "!!null" {
			break
		}
		p.eachField(kn, "succeed.", []string{"output"}, func(key string, k, v *yaml.Node) {
			s.Succeed = p.value(v, "succeed.output", 0)
		})
	}
	return s
}

func kindList() string {
	names := make([]string, 0, 6)
	for _, k := range StepKinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

func (p *parser) hasKey(n *yaml.Node, key string) bool {
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

func (p *parser) catches(n *yaml.Node) []Catch {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "catch", "must be a list of {errors: [...], next: step}")
		return nil
	}
	if len(n.Content) > MaxCatchClauses {
		p.errorf(n, "catch", "%d clauses, over the limit of %d", len(n.Content), MaxCatchClauses)
		return nil
	}
	var out []Catch
	for i, cn := range n.Content {
		field := fmt.Sprintf("catch[%d]", i)
		c := Catch{Pos: Pos{cn.Line, cn.Column}}
		p.eachField(cn, field+".", []string{"errors", "next"}, func(key string, k, v *yaml.Node) {
			switch key {
			case "errors":
				if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
					p.errorf(v, field+".errors", "must be a non-empty list of error types (\"*\" for any)")
					return
				}
				for _, e := range v.Content {
					c.Errors = append(c.Errors, p.str(e, field+".errors"))
				}
			case "next":
				c.Next = p.stepID(v, field+".next")
			}
		})
		if cn.Kind == yaml.MappingNode {
			if !p.hasKey(cn, "errors") {
				p.errorf(cn, field+".errors", "missing: list the error types to catch (\"*\" for any)")
			}
			if !p.hasKey(cn, "next") {
				p.errorf(cn, field+".next", "missing: name the step to go to")
			}
		}
		out = append(out, c)
	}
	return out
}

func (p *parser) cases(n *yaml.Node) []Case {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		p.errorf(n, "switch", "must be a non-empty list of {if: cond, next: step} and a last {default: step}")
		return nil
	}
	if len(n.Content) > MaxSwitchCases {
		p.errorf(n, "switch", "%d cases, over the limit of %d", len(n.Content), MaxSwitchCases)
		return nil
	}
	var out []Case
	for i, cn := range n.Content {
		field := fmt.Sprintf("switch[%d]", i)
		c := Case{Pos: Pos{cn.Line, cn.Column}}
		p.eachField(cn, field+".", []string{"if", "next", "default"}, func(key string, k, v *yaml.Node) {
			switch key {
			case "if":
				c.If = p.condition(v, field+".if")
				c.Pos = Pos{v.Line, v.Column + quoteOffset(v)}
			case "next":
				c.Next = p.stepID(v, field+".next")
			case "default":
				c.Default = true
				c.Next = p.stepID(v, field+".default")
			}
		})
		if cn.Kind != yaml.MappingNode {
			continue
		}
		switch {
		case c.Default && (p.hasKey(cn, "if") || p.hasKey(cn, "next")):
			p.errorf(cn, field, "a default case has only default: step")
		case c.Default && i != len(n.Content)-1:
			p.errorf(cn, field, "the default case must be the last")
		case !c.Default && (!p.hasKey(cn, "if") || !p.hasKey(cn, "next")):
			p.errorf(cn, field, "a case needs both if: and next: (or is the last, {default: step})")
		}
		out = append(out, c)
	}
	return out
}

// condition reads an if: field. It is CEL with or without ${ }.
func (p *parser) condition(n *yaml.Node, field string) string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		return n.Value
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.str(n, field) // reports the wrong type
		return ""
	}
	s := n.Value
	if inner, ok := exactExpr(s); ok {
		s = inner
	}
	if strings.TrimSpace(s) == "" {
		// An empty condition would compile to no program at all.
		p.errorf(n, field, "empty expression: a condition is a CEL expression that yields a bool")
		return ""
	}
	if len(s) > MaxExpressionBytes {
		p.errorf(n, field, "expression is %d bytes, over the limit of %d", len(s), MaxExpressionBytes)
		return ""
	}
	return s
}

func (p *parser) retry(n *yaml.Node, field string) *RetryPolicy {
	r := DefaultRetry
	if field != "retry" {
		r = DefaultCompensateRetry
	}
	p.eachField(n, field+".", []string{"attempts", "backoff", "max_backoff", "jitter", "permanent"}, func(key string, k, v *yaml.Node) {
		switch key {
		case "attempts":
			a, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || err != nil || a < 1 || a > MaxRetryAttempts {
				p.errorf(v, field+".attempts", "%q must be a whole number from 1 to %d", v.Value, MaxRetryAttempts)
				return
			}
			r.Attempts = a
		case "backoff":
			r.Backoff = p.duration(v, field+".backoff", durable.MaxDelay)
		case "max_backoff":
			r.MaxBackoff = p.duration(v, field+".max_backoff", durable.MaxDelay)
		case "jitter":
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" {
				p.errorf(v, field+".jitter", "must be true or false")
				return
			}
			r.Jitter = v.Value == "true"
		case "permanent":
			if v.Kind != yaml.SequenceNode {
				p.errorf(v, field+".permanent", "must be a list of error types")
				return
			}
			for _, e := range v.Content {
				r.Permanent = append(r.Permanent, p.str(e, field+".permanent"))
			}
		}
	})
	if r.Backoff > 0 && r.MaxBackoff > 0 && r.MaxBackoff < r.Backoff {
		p.errorf(n, field+".max_backoff", "%s is shorter than backoff %s", r.MaxBackoff, r.Backoff)
	}
	return &r
}

func (p *parser) compensation(n *yaml.Node) *Compensation {
	c := &Compensation{Pos: Pos{n.Line, n.Column}}
	p.eachField(n, "compensate.", []string{"action", "with", "retry", "timeout"}, func(key string, k, v *yaml.Node) {
		switch key {
		case "action":
			c.Action = p.action(v, "compensate.action")
		case "with":
			c.With = p.value(v, "compensate.with", 0)
		case "retry":
			c.Retry = p.retry(v, "compensate.retry")
		case "timeout":
			c.Timeout = p.duration(v, "compensate.timeout", durable.MaxDelay)
			c.TimeoutPos = Pos{v.Line, v.Column}
		}
	})
	if n.Kind == yaml.MappingNode && !p.hasKey(n, "action") {
		p.errorf(n, "compensate.action", "missing: name the action that undoes this step")
	}
	return c
}

// value turns a YAML node into a value template.
func (p *parser) value(n *yaml.Node, field string, depth int) *Value {
	v := &Value{Pos: Pos{n.Line, n.Column}}
	if depth > MaxValueDepth {
		p.errorf(n, field, "nested deeper than %d levels", MaxValueDepth)
		return v
	}
	switch n.Kind {
	case yaml.MappingNode:
		v.Kind = ValueMap
		p.eachField(n, field+".", nil, func(key string, k, c *yaml.Node) {
			v.Keys = append(v.Keys, key)
			v.Items = append(v.Items, p.value(c, field+"."+key, depth+1))
		})
	case yaml.SequenceNode:
		v.Kind = ValueList
		for i, c := range n.Content {
			v.Items = append(v.Items, p.value(c, fmt.Sprintf("%s[%d]", field, i), depth+1))
		}
	case yaml.ScalarNode:
		p.scalar(n, field, v)
	default:
		p.errorf(n, field, "unsupported YAML node")
	}
	return v
}

func (p *parser) scalar(n *yaml.Node, field string, v *Value) {
	v.Kind = ValueLiteral
	switch n.ShortTag() {
	case "!!null":
		v.Literal = nil
	case "!!bool":
		v.Literal = n.Value == "true"
	case "!!int":
		if digits := strings.TrimLeft(n.Value, "+-"); len(digits) > 1 && digits[0] == '0' {
			p.errorf(n, field, "integer with a leading zero (YAML may read it as octal or hex): write it without, or quote it for text")
			return
		}
		var i int64
		if err := n.Decode(&i); err != nil {
			var u uint64
			if err := n.Decode(&u); err != nil {
				p.errorf(n, field, "integer %s is out of range", n.Value)
				return
			}
			v.Literal = u
			return
		}
		v.Literal = i
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			p.errorf(n, field, "number %s is not a finite number", n.Value)
			return
		}
		v.Literal = f
	case "!!str", "!!timestamp":
		// A plain date is text, as written: the YAML library would make it
		// a timestamp the user did not ask for.
		p.template(n, field, v)
	default:
		p.errorf(n, field, "unsupported YAML tag %s", n.ShortTag())
	}
}

// template parses ${...} in a string scalar.
func (p *parser) template(n *yaml.Node, field string, v *Value) {
	s := n.Value
	v.Column = n.Column + quoteOffset(n)
	if inner, ok := exactExpr(s); ok {
		if strings.TrimSpace(inner) == "" {
			p.errorf(n, field, "empty expression: ${} must hold a CEL expression (write $${} for the text itself)")
			return
		}
		if len(inner) > MaxExpressionBytes {
			p.errorf(n, field, "expression is %d bytes, over the limit of %d", len(inner), MaxExpressionBytes)
			return
		}
		v.Kind, v.Expr = ValueExpr, inner
		v.Column += 2
		return
	}
	parts, err := splitTemplate(s)
	if err != nil {
		p.errorf(n, field, "%v", err)
		return
	}
	if len(parts) == 1 && parts[0].Expr == "" {
		v.Literal = parts[0].Text
		return
	}
	if len(parts) == 0 {
		v.Literal = ""
		return
	}
	for _, pt := range parts {
		if len(pt.Expr) > MaxExpressionBytes {
			p.errorf(n, field, "expression is %d bytes, over the limit of %d", len(pt.Expr), MaxExpressionBytes)
			return
		}
	}
	v.Kind, v.Parts = ValueInterp, parts
}

func quoteOffset(n *yaml.Node) int {
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		return 1
	}
	return 0
}

// exactExpr reports whether s is exactly one ${expr}, and returns expr.
func exactExpr(s string) (string, bool) {
	if !strings.HasPrefix(s, "${") || !strings.HasSuffix(s, "}") {
		return "", false
	}
	end, ok := exprEnd(s, 2)
	if !ok || end != len(s)-1 {
		return "", false
	}
	return s[2 : len(s)-1], true
}

// exprEnd finds the } closing an expression that starts at i, skipping
// braces inside CEL map literals and string literals.
func exprEnd(s string, i int) (int, bool) {
	depth := 0
	for ; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			i = j
		case '{':
			depth++
		case '}':
			if depth == 0 {
				return i, true
			}
			depth--
		}
	}
	return 0, false
}

// splitTemplate cuts text with ${...} into parts. "$${" stands for a literal "${".
func splitTemplate(s string) ([]InterpPart, error) {
	var parts []InterpPart
	var text strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			text.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end, ok := exprEnd(s, i+2)
			if !ok {
				return nil, fmt.Errorf("unclosed ${ at offset %d (write $${ for a literal ${)", i)
			}
			expr := s[i+2 : end]
			if strings.TrimSpace(expr) == "" {
				return nil, fmt.Errorf("empty expression: the ${} at offset %d holds nothing (write $${} for the text itself)", i)
			}
			if text.Len() > 0 {
				parts = append(parts, InterpPart{Text: text.String()})
				text.Reset()
			}
			parts = append(parts, InterpPart{Expr: expr})
			i = end + 1
		default:
			text.WriteByte(s[i])
			i++
		}
	}
	if text.Len() > 0 {
		parts = append(parts, InterpPart{Text: text.String()})
	}
	return parts, nil
}
