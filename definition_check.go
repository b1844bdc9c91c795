package lambdasaga

import (
	"errors"
	"strings"
)

// CheckCompensation is sagactl check --require-compensation in Go, for a
// test that keeps a definition's compensations complete: it walks every
// path of the definition and of its child sagas and returns nil when
// every action declares compensate (or compensate: none) and no
// compensation may read a value it lacks; otherwise an error listing each
// finding on a line of its own, "file:line:column: step ID: field:
// message (kind)", in source order, file by file.
func (d *Definition) CheckCompensation() error {
	var lines []string
	for _, f := range d.plan.CheckCompensation().Findings() {
		lines = append(lines, f.Problem.String()+" ("+string(f.Kind)+")")
	}
	if len(lines) == 0 {
		return nil
	}
	return errors.New(strings.Join(lines, "\n"))
}
