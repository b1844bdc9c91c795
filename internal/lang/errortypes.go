package lang

// Error types lambdasaga itself produces; actions choose their own. Catch
// clauses and retry.permanent lists name them.
const (
	// ErrorTypeStateTooLarge: a step took the saga's state past the size a
	// store holds.
	ErrorTypeStateTooLarge = "StateTooLarge"
	// ErrorTypeActionNotFound: a call to an action nobody registered.
	ErrorTypeActionNotFound = "ActionNotFound"
	ErrorTypeGeneric        = "Error"
	ErrorTypeTimeout        = "Timeout"
	ErrorTypeAssertion      = "AssertionFailed"
	ErrorTypeExpression     = "ExpressionError"
	ErrorTypeDeadline       = "SagaDeadlineExceeded"
	ErrorTypeCancelled      = "Cancelled"
	ErrorTypeStepLimit      = "StepLimitExceeded"
	ErrorTypeOutputFormat   = "InvalidOutput"
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
