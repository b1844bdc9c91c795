package saga

import (
	"context"
	"errors"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// Sentinel errors. Callers test for them with errors.Is.
var (
	// ErrInvalidInput: a saga input does not match the declared input types.
	ErrInvalidInput = errors.New("invalid saga input")
	// ErrInvalidEvent: an event does not apply to the saga in its current state.
	ErrInvalidEvent = errors.New("event does not apply")
	// ErrUnknownFormat: encoded state carries a format version this build does not know.
	ErrUnknownFormat = errors.New("unknown state format")
)

// ActionError is an error with a type name that catch clauses and
// retry.permanent lists match against.
type ActionError struct {
	Type    string // the error type; empty: "Error"
	Message string // kept in the saga's state, cut to MaxErrorMessageBytes: name ids, not values
}

// Error returns "Type: Message", or Type alone when there is no message.
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
		return lang.ErrorTypeTimeout
	}
	return lang.ErrorTypeGeneric
}

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

// ErrUnstorable marks a state that cannot be encoded (a value too deep, a
// type state cannot hold): like ErrTooLarge, it will never store as it is.
var ErrUnstorable = errors.New("state cannot be stored")
