package sagactl

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/saga"
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
		plan, ok := c.loadWith(f, saga.Options{MaxStepTimeout: limit.max})
		if !ok {
			if limit.max > 0 {
				fmt.Fprintf(c.Stderr, "(step timeouts checked against %s: at most %s)\n", limit.from, limit.max)
			}
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
	fs.DurationVar(&f.timeout, "function-timeout", 0, "the deployed functions' timeout: refuse a step timeout they cannot give an action (their timeout less "+saga.ResultReserve.String()+" to record the outcome)")
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
	case f.timeout > 15*time.Minute:
		c.errorf("--function-timeout: %s is over Lambda's limit of 15m", f.timeout)
		return l, false
	case f.timeout == 0:
		return l, true
	default:
		l.from = fmt.Sprintf("a function with timeout %s", f.timeout)
	}
	l.max = saga.StepTimeoutLimit(timeout)
	if l.max <= 0 {
		what := "--function-timeout"
		if f.template != "" {
			what = "--template: " + l.from
		}
		c.errorf("%s: %s leaves no time for an action: a function keeps %s of its timeout to record the outcome", what, timeout, saga.ResultReserve)
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
