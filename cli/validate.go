package cli

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// maxTemplateBytes bounds what sagactl reads of a SAM template: 1 MiB,
// CloudFormation's own limit for a template in S3.
const maxTemplateBytes = 1 << 20

func runValidate(c *Config, args []string) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	var fn functionFlags
	fn.register(fs)
	files, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	if len(files) == 0 {
		c.errorf("validate: name at least one definition file")
		return ExitUsage
	}
	limit, ok := fn.limit(c)
	if !ok {
		return ExitUsage
	}
	code = ExitOK
	for _, f := range files {
		plan, ok := c.load(f)
		if ok {
			ok = c.checkStepTimeouts(plan, limit)
		}
		if !ok {
			code = ExitUsage
			continue
		}
		fmt.Fprintf(c.Stdout, "%s: ok (saga %s, %d steps, hash %s)\n", f, plan.Name(), len(plan.Definition().Steps), plan.Hash()[:12])
	}
	return code
}

// functionFlags say how long the functions that run actions may run:
// --function-timeout, or the SAM template's Timeout.
type functionFlags struct {
	timeout  time.Duration
	template string
}

func (f *functionFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.timeout, "function-timeout", 0, "the deployed functions' timeout: refuse a step timeout they cannot give an action (their timeout less "+engine.ResultReserve.String()+" to record the outcome)")
	fs.StringVar(&f.template, "template", "", "read the functions' timeout from this SAM template (e.g. infra/template.yaml) instead of --function-timeout")
}

// stepTimeoutLimit is the longest step timeout the functions can give,
// and what it comes from, for messages.
type stepTimeoutLimit struct {
	max  time.Duration // zero: no limit was asked for
	from string        // "a function with timeout 30s", "function AdvanceFunction of FILE (timeout 30s)"
}

// limit works out the longest step timeout the flags allow, printing why
// when they allow none or contradict each other.
func (f *functionFlags) limit(c *Config) (stepTimeoutLimit, bool) {
	var l stepTimeoutLimit
	timeout := f.timeout
	switch {
	case f.template != "" && f.timeout != 0:
		c.errorf("give --function-timeout or --template, not both")
		return l, false
	case f.template != "":
		name, t, err := templateFunctionTimeout(f.template)
		if err != nil {
			c.errorf("--template: %v", err)
			return l, false
		}
		timeout, l.from = t, fmt.Sprintf("function %s of %s (timeout %s)", name, f.template, t)
	case f.timeout < 0:
		c.errorf("--function-timeout: must be positive")
		return l, false
	case f.timeout == 0:
		return l, true
	default:
		l.from = fmt.Sprintf("a function with timeout %s", f.timeout)
	}
	l.max = engine.StepTimeoutLimit(timeout)
	if l.max <= 0 {
		what := "--function-timeout"
		if f.template != "" {
			what = "--template: " + l.from
		}
		c.errorf("%s: %s leaves no time for an action: a function keeps %s of its timeout to record the outcome", what, timeout, engine.ResultReserve)
		return l, false
	}
	return l, true
}

// templateFunctionTimeout reads a SAM template and returns the shortest
// timeout among the functions that run actions: those fed by an SQS queue
// (the sweep function, on a schedule, runs none). Ties go to the first in
// the template.
func templateFunctionTimeout(file string) (string, time.Duration, error) {
	src, err := readFile(file, maxTemplateBytes, "a template")
	if err != nil {
		return "", 0, err
	}
	t, err := samtemplate.Parse(file, src)
	if err != nil {
		return "", 0, err
	}
	name, shortest := "", 0
	for _, fn := range t.Functions {
		if len(fn.Events) > 0 && (name == "" || fn.Timeout < shortest) {
			name, shortest = fn.Name, fn.Timeout
		}
	}
	if name == "" {
		return "", 0, errors.New(file + ": no function with an SQS event source: none runs actions")
	}
	return name, time.Duration(shortest) * time.Second, nil
}

// checkStepTimeouts reports, in the style of validation's problems, each
// step or compensation timeout over l.max, and returns false if any is.
//
// This is the CLI's stopgap until compilation takes the limit
// (engine.Options.MaxStepTimeout): positions are those of the step and of
// its compensate block, as the definition does not export its fields'.
func (c *Config) checkStepTimeouts(plan *engine.Plan, l stepTimeoutLimit) bool {
	if l.max <= 0 {
		return true
	}
	def := plan.Definition()
	var problems []engine.Problem
	over := func(s *engine.Step, pos engine.Pos, field string, d time.Duration) {
		problems = append(problems, engine.Problem{File: def.File, Line: pos.Line, Column: pos.Column, Step: s.ID, Field: field,
			Message: fmt.Sprintf("%s is longer than %s, the longest %s can give an action (its timeout less %s to record the outcome)", d, l.max, l.from, engine.ResultReserve)})
	}
	for _, s := range def.Steps {
		if s.Timeout > l.max {
			over(s, s.Pos, "timeout", s.Timeout)
		}
		if s.Compensate != nil && s.Compensate.Timeout > l.max {
			over(s, s.Compensate.Pos, "compensate.timeout", s.Compensate.Timeout)
		}
	}
	for _, p := range problems {
		fmt.Fprintln(c.Stderr, p.String())
	}
	if len(problems) > 0 {
		c.errorf("%s: %d problem(s)", def.File, len(problems))
	}
	return len(problems) == 0
}
