package lang

import "time"

// StepKind is the kind of a step; each step has exactly one.
type StepKind string

const (
	KindAction  StepKind = "action"  // runs an action; may retry, time out, catch and declare a compensation
	KindSet     StepKind = "set"     // assigns vars, in order
	KindSwitch  StepKind = "switch"  // goes to the first case whose condition holds
	KindAssert  StepKind = "assert"  // fails the step when its condition is false
	KindFail    StepKind = "fail"    // fails the saga: it compensates
	KindSucceed StepKind = "succeed" // ends the saga, succeeded, with its output (default: vars)
	KindWait    StepKind = "wait"    // pauses the saga, status waiting, for a duration or until a time
	KindAwait   StepKind = "await"   // pauses the saga until a named signal arrives or its timeout passes

	// The kinds that fork: each runs child runs and joins them (
	// docs/PROTOCOL.md, "Forks"). IsFork reports them.
	KindParallel StepKind = "parallel" // runs its branches concurrently; ends when all end
	KindForeach  StepKind = "foreach"  // runs its body once per item of a CEL list, at most Concurrency at once
	KindSaga     StepKind = "saga"     // runs a child saga, a definition in a file next to this one
)

// StepKinds lists the step kinds that run in one saga item, in
// documentation order; ForkKinds lists those that fork child runs.
func StepKinds() []StepKind {
	return []StepKind{KindAction, KindSet, KindSwitch, KindAssert, KindFail, KindSucceed, KindWait, KindAwait}
}

// ForkKinds lists the kinds that fork (IsFork): parallel, foreach, saga
// (docs/DEFINITIONS.md, "Forks").
func ForkKinds() []StepKind {
	return []StepKind{KindParallel, KindForeach, KindSaga}
}

// allKinds lists every kind the parser knows, in documentation order.
func allKinds() []StepKind { return append(StepKinds(), ForkKinds()...) }

// IsFork reports whether steps of kind k fork child runs: parallel,
// foreach and saga.
func IsFork(k StepKind) bool { return k == KindParallel || k == KindForeach || k == KindSaga }

// InputTypes lists the type names an input field may declare.
func InputTypes() []string {
	return []string{"string", "int", "uint", "double", "bool", "bytes", "list", "map", "timestamp", "duration", "any"}
}

// Pos is a position in a definition's source.
type Pos struct {
	Line, Column int // 1-based; zero when there is no position
}

// Definition is a parsed saga definition. It keeps source positions so that
// validation can point at the offending line.
type Definition struct {
	File string // the file name given to Parse, for problems
	// Source is the source as given; its SHA-256 identifies the definition.
	// Once package saga has compiled a definition with child sagas, it is
	// the bundle of its source and theirs (saga.Plan.Source).
	Source []byte
	Name   string       // the saga's name (saga:)
	Input  []InputField // nil when the definition declares no input
	// Timeout is the saga's deadline after its start (timeout:); past it
	// the saga compensates. Zero: no deadline.
	Timeout time.Duration
	// OnFailure is what a step that fails for good does to the saga
	// (on_failure:): OnFailureCompensate (the default) or OnFailureHold.
	OnFailure OnFailure
	// HoldFor is how long a held saga waits for an operator before it
	// compensates (hold_for:); zero: until its deadline, or for ever.
	HoldFor time.Duration
	Steps   []*Step // in source order; the first runs first

	pos map[string]Pos // saga-level field -> position
}

// OnFailure is what a saga does when a step fails for good.
type OnFailure string

const (
	// OnFailureCompensate undoes the completed steps at once: the default.
	OnFailureCompensate OnFailure = "compensate"
	// OnFailureHold parks the saga in status held when an action step
	// fails for good, for an operator to retry the step or compensate.
	OnFailureHold OnFailure = "hold"
)

// OnFailures lists every OnFailure.
func OnFailures() []OnFailure { return []OnFailure{OnFailureCompensate, OnFailureHold} }

// InputField is one declared input field.
type InputField struct {
	Name string // the field of input it declares
	Type string // one of InputTypes
	// Secret: the field was declared "secret TYPE" (a card number). Its
	// value reaches actions as any other, and is hidden wherever a value or
	// a message leaves the system for a human (saga.Redactor).
	Secret bool
	Pos    Pos // of the field's name
}

// SecretWord, before an input field's type, marks the field secret:
// input: {card_number: secret string}.
const SecretWord = "secret"

// Step is one step of a definition. Exactly one of the kind-specific groups
// of fields is set, according to Kind.
type Step struct {
	ID    string   // unique in the definition; ID.compensate names its compensation
	Kind  StepKind // says which of the groups below is set
	Pos   Pos      // where the step's mapping starts
	Next  string   // the step to go to after this one; empty: the following step
	Catch []Catch  // action and assert steps only; tried in order

	// action
	Action     string        // a Go action's name, or lambda:FUNCTION
	With       *Value        // the action's input; nil: none
	Out        string        // the var that receives the output; empty: not kept
	Retry      *RetryPolicy  // nil: DefaultRetry
	Timeout    time.Duration // bounds one attempt; zero: no step timeout
	Compensate *Compensation // what undoes the step; nil: nothing
	// NoCompensation: the step says compensate: none, on purpose: it
	// changes nothing that needs undoing (a read, a quote, a check). The
	// engine treats it as a step without compensate; the compensation
	// check (sagactl check) takes it as declared, not forgotten.
	NoCompensation bool
	// Callback makes the step wait, once its action returns, for someone
	// to complete the action's callback token; nil: the action's return
	// completes the step.
	Callback *Callback

	Set     []Assignment // set
	Switch  []Case       // switch
	Assert  *Assertion   // assert
	Fail    *Failure     // fail
	Succeed *Value       // succeed: the output, nil for none
	Wait    *Wait        // wait
	Await   *Await       // await (its out is Out)

	// Parallel is a parallel step's branches, in source order; its out is
	// Out (the list of the branches' outputs).
	Parallel []*Branch
	// Foreach is a foreach step's list and how it is iterated; its body is
	// Steps and its out is Out (the list of the iterations' outputs).
	Foreach *Foreach
	// Steps is a foreach step's body, run once per item.
	Steps []*Step
	// Saga is a saga step's child: a relative path, resolved against the
	// directory of the file that names it. Its input is With, its output
	// goes to Out.
	Saga string

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

// Branch is one branch of a parallel step: its steps, run in order from
// the first; its end ends the branch.
type Branch struct {
	Steps []*Step // in source order; the first runs first
	Pos   Pos     // where the branch's mapping starts
}

// Foreach says what a foreach step iterates and how.
type Foreach struct {
	Items string // a CEL expression, without ${ }, yielding the list to iterate
	Pos   Pos    // of Items' expression
	// As names the item in the body's expressions; DefaultAs unless given.
	// The body also sees index, the item's position in the list (an int from 0).
	As string
	// Concurrency bounds the iterations in flight: 1 to MaxConcurrency,
	// DefaultConcurrency unless given.
	Concurrency int
}

// Wait is a wait step's timer: For, or Until, never both.
type Wait struct {
	For   time.Duration // wait this long after the step is reached; zero: Until
	Until string        // a CEL expression, without ${ }, yielding the timestamp to wait until
	Pos   Pos           // of Until's expression; of the wait mapping otherwise
}

// Await is an await step's signal: its name, and how long to wait for it.
type Await struct {
	Signal  string        // the signal's name
	Timeout time.Duration // the step fails with Timeout after this long; zero: MaxWait
	Pos     Pos           // of the await mapping
}

// Callback is an action step's callback: how long its token may take to be
// completed once the action has returned.
type Callback struct {
	Timeout time.Duration // the attempt fails with Timeout after this long; zero: MaxWait
	Pos     Pos           // of the callback mapping
}

// Catch routes a failure whose error type is listed to another step.
type Catch struct {
	Errors []string // error types; "*" matches any
	Next   string   // the step to go to instead of compensating
	Pos    Pos      // where the clause starts
}

// Compensation is the action that undoes a completed step.
type Compensation struct {
	Action  string        // as Step.Action
	With    *Value        // evaluated when the compensation runs, with the step's out visible; nil: no input
	Retry   *RetryPolicy  // nil: DefaultCompensateRetry
	Timeout time.Duration // bounds one attempt; zero: no step timeout
	Pos     Pos           // where the compensate mapping starts

	TimeoutPos Pos // of the timeout field, when given
}

// Assignment is one name: value pair of a set step.
type Assignment struct {
	Name  string // the var assigned
	Value *Value // evaluated with the assignments before it visible
}

// Case is one branch of a switch: when If holds (or Default), go to Next.
type Case struct {
	If      string // a CEL condition, without ${ }; empty for the default case
	Default bool   // the last case, {default: step}, which always matches
	Next    string // the step to go to
	Pos     Pos    // of the condition; of the case when it has none
}

// Assertion stops the saga with an error when If is false.
type Assertion struct {
	If      string // a CEL condition, without ${ }
	Message string // the failure's message; empty: "assertion failed: " followed by If
	Error   string // the failure's error type; AssertionFailed unless given
	Pos     Pos    // of the condition; of the assert mapping when it has none
}

// Failure is a fail step's error.
type Failure struct {
	Error   string // the error type, required
	Message string // empty: "the saga reached fail step ID"
}

// RetryPolicy says how often and how patiently a failing action is retried.
type RetryPolicy struct {
	Attempts   int           // attempts in all, the first included: 1 to 100
	Backoff    time.Duration // the delay before the second attempt, doubling for each after it
	MaxBackoff time.Duration // caps the delay; zero or above durable.MaxDelay: durable.MaxDelay
	Jitter     bool          // spread each delay at random over its upper half
	Permanent  []string      // error types never retried
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
	ValueMap                      // a YAML mapping: Keys and Items
	ValueList                     // a YAML sequence: Items
)

// Value is a value template from a definition: literals, CEL expressions,
// interpolated strings, and maps and lists of them.
type Value struct {
	Kind    ValueKind    // says which of the fields below are set
	Pos     Pos          // of the YAML node
	Literal any          // ValueLiteral
	Expr    string       // ValueExpr
	Parts   []InterpPart // ValueInterp
	Keys    []string     // ValueMap, in source order
	Items   []*Value     // ValueMap (parallel to Keys) and ValueList
	Column  int          // column of the expression text within the line, for CEL positions
}

// InterpPart is literal text or an expression within an interpolated string.
type InterpPart struct {
	Text string // literal text, "$${" already read as "${"; empty in an expression part
	Expr string // the CEL source between ${ and }; empty in a text part
}
