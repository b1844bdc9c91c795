package lang

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrInvalidDefinition: a saga definition failed to parse or validate.
var ErrInvalidDefinition = errors.New("invalid saga definition")

// Problem is one thing wrong with a definition, located in its source.
type Problem struct {
	File    string // the file name the definition was parsed with
	Line    int    // 1-based; zero when the problem has no position
	Column  int    // 1-based; zero when the problem has no position
	Step    string // step id, empty for saga-level problems
	Field   string // dotted field path within the step or saga, e.g. "with.order_id"
	Message string // what is wrong; where is in the fields above
}

// String formats the problem as "file:line:column: step ID: field:
// message", leaving out the parts that are empty.
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
	Problems []Problem // in source order, none twice
}

// Error returns the problems' Strings, one per line.
func (e *DefinitionError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Is reports whether target is ErrInvalidDefinition.
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }

// NewDefinitionError reports problems in source order, each once.
func NewDefinitionError(problems []Problem) *DefinitionError {
	return &DefinitionError{Problems: sortProblems(problems)}
}

// sortProblems puts problems in source order, file by file (a definition
// with child sagas has several), breaking ties on every other field so the
// same definition always reads the same, and drops repeats.
func sortProblems(ps []Problem) []Problem {
	slices.SortFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column),
			cmp.Compare(a.Step, b.Step), cmp.Compare(a.Field, b.Field), cmp.Compare(a.Message, b.Message))
	})
	return slices.Compact(ps)
}
