package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Callers test for them with errors.Is.
var (
	// ErrInvalidDefinition: a saga definition failed to parse or validate.
	ErrInvalidDefinition = errors.New("invalid saga definition")
	// ErrInvalidInput: a saga input does not match the declared input types.
	ErrInvalidInput = errors.New("invalid saga input")
	// ErrInvalidEvent: an event does not apply to the saga in its current state.
	ErrInvalidEvent = errors.New("event does not apply")
	// ErrUnknownFormat: encoded state carries a format version this build does not know.
	ErrUnknownFormat = errors.New("unknown state format")
	// ErrDamagedState: a stored state does not fit its definition (a cursor
	// past the plan, say); the message that found it cannot be handled.
	ErrDamagedState = errors.New("damaged saga state")
	// ErrNoTime: too little of the invocation was left to run an action and
	// record its outcome; the message is handed back, nothing was done.
	ErrNoTime = errors.New("not enough time left in the invocation")
)

// Error type names the engine itself produces. Actions choose their own.
const (
	ErrorTypeGeneric      = "Error"
	ErrorTypeTimeout      = "Timeout"
	ErrorTypeAssertion    = "AssertionFailed"
	ErrorTypeExpression   = "ExpressionError"
	ErrorTypeDeadline     = "SagaDeadlineExceeded"
	ErrorTypeCancelled    = "Cancelled"
	ErrorTypeStepLimit    = "StepLimitExceeded"
	ErrorTypeOutputFormat = "InvalidOutput"
	// ErrorTypeVisitLimit: the saga made more action visits than
	// Options.MaxVisits allows (a loop through a catch, say).
	ErrorTypeVisitLimit = "VisitLimitExceeded"
)

// Uncatchable reports whether a failure of type typ goes straight to
// compensation, past every catch clause (even "*"): the failures that a
// catch route could only repeat. A definition naming one in a catch is
// refused.
func Uncatchable(typ string) bool {
	return typ == ErrorTypeStateTooLarge || typ == ErrorTypeStepLimit || typ == ErrorTypeVisitLimit
}

// ActionError is an error with a type name that catch clauses and
// retry.permanent lists match against.
type ActionError struct {
	Type    string
	Message string
}

func (e *ActionError) Error() string {
	if e.Message == "" {
		return e.Type
	}
	return e.Type + ": " + e.Message
}

// NewError returns an error of the given type, for actions whose failures
// catch clauses should be able to tell apart.
func NewError(typ, message string) error { return &ActionError{Type: typ, Message: message} }

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the step fails at once and the
// saga compensates (or a catch routes it). Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// ErrorType is the type name of err: the Type of an ActionError in its chain,
// "Timeout" for a context deadline, and "Error" otherwise.
func ErrorType(err error) string {
	var ae *ActionError
	if errors.As(err, &ae) && ae.Type != "" {
		return ae.Type
	}
	if isDeadline(err) {
		return ErrorTypeTimeout
	}
	return ErrorTypeGeneric
}

// Problem is one thing wrong with a definition, located in its source.
type Problem struct {
	File    string
	Line    int
	Column  int
	Step    string // step id, empty for saga-level problems
	Field   string // dotted field path within the step or saga, e.g. "with.order_id"
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", p.Line, p.Column)
	}
	b.WriteString(": ")
	if p.Step != "" {
		fmt.Fprintf(&b, "step %s: ", p.Step)
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// DefinitionError lists every problem found in a definition. It matches
// ErrInvalidDefinition with errors.Is.
type DefinitionError struct {
	Problems []Problem
}

func (e *DefinitionError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }

func isDeadline(err error) bool { return errors.Is(err, context.DeadlineExceeded) }

// errorMessage is err's text without the type prefix an ActionError adds,
// since StepError keeps the type apart.
func errorMessage(err error) string {
	var ae *ActionError
	if errors.As(err, &ae) && err.Error() == ae.Error() {
		return ae.Message
	}
	return err.Error()
}
