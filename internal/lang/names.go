package lang

import (
	"regexp"
	"strings"
)

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

// IsLambdaAction reports whether the action name is run by Lambda Invoke
// (lambda:FUNCTION) rather than by a Go action.
func IsLambdaAction(name string) bool { return strings.HasPrefix(name, lambdaActionPrefix) }

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

// compensateSuffix turns a step id into the name of its compensation; no
// step id may end with it, so the two cannot be confused.
const compensateSuffix = ".compensate"

// SignalNamePattern matches a signal's name: a letter, then letters,
// digits, '_', '.' or '-', at most 80 (as a step id). SignalNameRule says
// so in words, for errors.
var SignalNamePattern = namePattern

// ValidSagaName reports whether name can name a saga (a definition's
// saga field): SagaNameRule.
func ValidSagaName(name string) bool { return namePattern.MatchString(name) }

// SagaNameRule describes a valid saga name, for errors.
const SagaNameRule = "a letter, then letters, digits, '_', '.' or '-', at most 80"

// SignalNameRule describes SignalNamePattern.
const SignalNameRule = "a letter, then letters, digits, '_', '.' or '-', at most 80"
