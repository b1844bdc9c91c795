package lang

import "time"

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
