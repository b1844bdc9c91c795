package sagactl

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// checkExitCodes is what check --help says of its exit codes.
const checkExitCodes = `
Exit codes:
  0  every definition is valid (and, with --require-compensation, has no finding)
  1  bad usage, or an invalid definition (its problems printed as validate prints them)
  6  --require-compensation: some definition has a finding
`

func runCheck(c *Config, args []string) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	require := fs.Bool("require-compensation", false, "exit 6 when an action lacks compensate (and compensate: none) or a compensation may read a value it lacks: a CI gate")
	asJSON := fs.Bool("json", false, "print the check as JSON (docs/DEFINITIONS.md, \"The compensation check\")")
	files, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	if len(files) == 0 {
		c.errorf("check: name at least one definition file")
		return ExitUsage
	}
	code = ExitOK
	var checked []saga.CheckedFile
	seen := map[string]bool{}
	for _, f := range files {
		plan, ok := c.load(f)
		if !ok {
			code = ExitUsage
			continue
		}
		for _, cf := range plan.CheckCompensation().Files {
			// A child saga named on the command line, or run by two
			// definitions, is checked once.
			if !seen[cf.File] {
				seen[cf.File] = true
				checked = append(checked, cf)
			}
		}
	}
	findings := 0
	for _, cf := range checked {
		findings += len(cf.Findings)
	}
	switch {
	case *asJSON:
		writeCheckJSON(c.Stdout, checked, findings)
	case len(checked) > 0:
		writeCheck(c.Stdout, checked, findings)
	}
	if code == ExitOK && *require && findings > 0 {
		c.errorf("check: %d finding(s) with --require-compensation", findings)
		return ExitFindings
	}
	return code
}

// writeCheck prints the check for a human: file by file, each step that
// can fail and what compensation would undo, then the findings.
func writeCheck(w io.Writer, files []saga.CheckedFile, findings int) {
	for i, cf := range files {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s: saga %s", cf.File, cf.Saga)
		if len(cf.RunBy) > 0 {
			fmt.Fprintf(w, ", run by %s", strings.Join(cf.RunBy, ", "))
		}
		fmt.Fprintln(w)
		if len(cf.Failures) == 0 {
			fmt.Fprintln(w, "  no step can fail")
		} else {
			fmt.Fprintln(w, "  if a step fails, compensation undoes, newest first:")
		}
		for _, fp := range cf.Failures {
			head := fmt.Sprintf("  line %d %s (%s", fp.Line, fp.Step, fp.Kind)
			if fp.In != "" {
				head += ", in " + fp.In
			}
			head += ")"
			then := ""
			if fp.Fork != "" {
				then = "; then " + fp.Fork + " fails"
			}
			if len(fp.Stacks) == 1 && fp.Omitted == 0 {
				fmt.Fprintf(w, "%s: %s%s\n", head, undoLine(fp, fp.Stacks[0]), then)
				continue
			}
			paths := fmt.Sprint(len(fp.Stacks) + fp.Omitted)
			if cf.Truncated {
				paths = "at least " + paths // the walk stopped before it met them all
			}
			fmt.Fprintf(w, "%s, on %s paths%s:\n", head, paths, then)
			for _, s := range fp.Stacks {
				fmt.Fprintf(w, "      %s\n", undoLine(fp, s))
			}
			if fp.Omitted > 0 {
				fmt.Fprintf(w, "      and %d more (only the %d longest are listed)\n", fp.Omitted, saga.MaxCheckStacks)
			}
		}
		if cf.Truncated {
			fmt.Fprintf(w, "  (too many paths: the walk of a list of steps stopped at %d steps and stacks, so stacks may be missing above; the findings below do not depend on it)\n", saga.MaxCheckStates)
		}
		if len(cf.Findings) == 0 {
			fmt.Fprintln(w, "  no findings")
			continue
		}
		fmt.Fprintf(w, "  %d finding(s):\n", len(cf.Findings))
		for _, f := range cf.Findings {
			fmt.Fprintf(w, "  %s (%s)\n", f.Problem.String(), f.Kind)
		}
	}
	fmt.Fprintf(w, "\n%d finding(s) in %d file(s)\n", findings, len(files))
}

// undoLine says what one compensation stack undoes, for a failure at fp.
func undoLine(fp saga.FailurePoint, stack []saga.Undo) string {
	var parts []string
	switch fp.Kind {
	case lang.KindParallel:
		parts = append(parts, "what its branches completed")
	case lang.KindForeach:
		parts = append(parts, "what its iterations completed")
	case lang.KindSaga:
		parts = append(parts, "what its child saga completed")
	}
	if fp.Self != nil {
		parts = append(parts, undoName(*fp.Self))
	}
	for _, u := range stack {
		parts = append(parts, undoName(u))
	}
	if len(parts) == 0 {
		return "nothing to undo"
	}
	return "undo " + strings.Join(parts, ", ")
}

func undoName(u saga.Undo) string {
	var what []string
	switch u.Kind {
	case lang.KindParallel:
		what = append(what, "parallel: its branches, the last first")
	case lang.KindForeach:
		what = append(what, "foreach: its iterations, the last first")
	case lang.KindSaga:
		what = append(what, "child saga "+u.Child)
	default:
		what = append(what, u.Action)
	}
	if u.Repeated {
		what = append(what, "each visit, the newest first")
	}
	if u.IfTookEffect {
		what = append(what, "if it took effect")
	}
	return u.Step + " (" + strings.Join(what, ", ") + ")"
}

// The JSON of check --json: docs/DEFINITIONS.md, "The compensation
// check", documents it. Every field is always there.
type (
	checkJSON struct {
		Files    []checkFileJSON `json:"files"`
		Findings int             `json:"findings"`
	}
	checkFileJSON struct {
		File      string             `json:"file"`
		Saga      string             `json:"saga"`
		RunBy     []string           `json:"run_by"`
		Truncated bool               `json:"truncated"`
		Failures  []checkFailureJSON `json:"failures"`
		Findings  []checkFindingJSON `json:"findings"`
	}
	checkFailureJSON struct {
		Step    string          `json:"step"`
		Kind    string          `json:"kind"`
		Line    int             `json:"line"`
		Column  int             `json:"column"`
		In      string          `json:"in"`
		Fork    string          `json:"fork"`
		Self    *checkUndoJS    `json:"self"`
		Stacks  [][]checkUndoJS `json:"stacks"`
		Omitted int             `json:"omitted"`
	}
	checkUndoJS struct {
		Step         string `json:"step"`
		Kind         string `json:"kind"`
		Action       string `json:"action"`
		Child        string `json:"child"`
		Repeated     bool   `json:"repeated"`
		IfTookEffect bool   `json:"if_took_effect"`
	}
	checkFindingJSON struct {
		Kind    string `json:"kind"`
		File    string `json:"file"`
		Line    int    `json:"line"`
		Column  int    `json:"column"`
		Step    string `json:"step"`
		Field   string `json:"field"`
		Message string `json:"message"`
	}
)

func writeCheckJSON(w io.Writer, files []saga.CheckedFile, findings int) {
	out := checkJSON{Files: []checkFileJSON{}, Findings: findings}
	for _, cf := range files {
		f := checkFileJSON{File: cf.File, Saga: cf.Saga, RunBy: append([]string{}, cf.RunBy...), Truncated: cf.Truncated,
			Failures: []checkFailureJSON{}, Findings: []checkFindingJSON{}}
		for _, fp := range cf.Failures {
			j := checkFailureJSON{Step: fp.Step, Kind: string(fp.Kind), Line: fp.Line, Column: fp.Column, In: fp.In, Fork: fp.Fork,
				Stacks: [][]checkUndoJS{}, Omitted: fp.Omitted}
			if fp.Self != nil {
				self := undoJSON(*fp.Self)
				j.Self = &self
			}
			for _, s := range fp.Stacks {
				stack := []checkUndoJS{}
				for _, u := range s {
					stack = append(stack, undoJSON(u))
				}
				j.Stacks = append(j.Stacks, stack)
			}
			f.Failures = append(f.Failures, j)
		}
		for _, fd := range cf.Findings {
			f.Findings = append(f.Findings, checkFindingJSON{Kind: string(fd.Kind), File: fd.File, Line: fd.Line, Column: fd.Column, Step: fd.Step, Field: fd.Field, Message: fd.Message})
		}
		out.Files = append(out.Files, f)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

func undoJSON(u saga.Undo) checkUndoJS {
	return checkUndoJS{Step: u.Step, Kind: string(u.Kind), Action: u.Action, Child: u.Child, Repeated: u.Repeated, IfTookEffect: u.IfTookEffect}
}
