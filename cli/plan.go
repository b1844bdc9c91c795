package cli

import (
	"flag"
	"fmt"

	"github.com/lambdasaga/lambdasaga/engine"
)

func runPlan(c *Config, args []string) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	input := fs.String("input", "", "saga input: JSON, or @FILE (default: zero values of the declared fields)")
	var fails stringList
	fs.Var(&fails, "fail", "the step (or STEP.compensate) that fails for good; repeatable")
	files, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	if len(fails) == 0 {
		c.errorf("plan: say which step fails with --fail STEP")
		return ExitUsage
	}
	plan, _, ok := c.oneDefinition("plan", files)
	if !ok {
		return ExitUsage
	}
	failing, ok := c.checkFails(plan, fails)
	if !ok {
		return ExitUsage
	}
	in, ok := c.inputOrZero(plan, *input)
	if !ok {
		return ExitUsage
	}
	checked, err := plan.CheckInput(in)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	path, comps, st, err := simulate(plan, checked, failing)
	if err != nil {
		c.errorf("plan: %v", err)
		return ExitUsage
	}
	if st.Failure == nil {
		fmt.Fprintf(c.Stdout, "with this input the saga %s without reaching a failing step (path: %s)\n", st.Status, join(path))
		return ExitUsage
	}
	what := st.Failure.Error()
	if st.Failure.Type == ErrorTypeSimulated {
		what = "step " + st.Failure.Step + " fails for good"
	}
	fmt.Fprintf(c.Stdout, "if %s (path: %s), compensation runs:\n", what, join(path))
	if len(comps) == 0 {
		fmt.Fprintf(c.Stdout, "  nothing to compensate: no completed step declares compensate\n")
	}
	for i, cp := range comps {
		fmt.Fprintf(c.Stdout, "  %d. undo %s: %s\n", i+1, cp.step, cp.action)
	}
	fmt.Fprintf(c.Stdout, "the saga ends %s\n", st.Status)
	return ExitOK
}

type plannedComp struct{ step, action string }

// simulate dry-runs the saga: every action succeeds with its input as
// output, except those in fail.
func simulate(plan *engine.Plan, in map[string]any, fail failSet) ([]string, []plannedComp, *engine.State, error) {
	var (
		path  []string
		comps []plannedComp
	)
	st, err := plan.DryRun(engine.DryRunParams{
		Input: in,
		Act:   fail.act,
		OnStep: func(rec engine.StepRecord) {
			if !rec.Compensation && rec.Outcome != engine.OutcomeStarted {
				path = append(path, rec.Step)
			}
		},
		OnCall: func(c engine.Call) {
			if c.Compensation {
				comps = append(comps, plannedComp{c.Step, c.Action})
			}
		},
	})
	return path, comps, st, err
}

func zeroInput(def *engine.Definition) map[string]any {
	in := map[string]any{}
	for _, f := range def.Input {
		switch f.Type {
		case "string":
			in[f.Name] = ""
		case "int", "uint", "double":
			in[f.Name] = int64(0)
		case "bool":
			in[f.Name] = false
		case "bytes":
			in[f.Name] = ""
		case "list":
			in[f.Name] = []any{}
		case "map":
			in[f.Name] = map[string]any{}
		case "timestamp":
			in[f.Name] = "2000-01-01T00:00:00Z"
		case "duration":
			in[f.Name] = "0s"
		default:
			in[f.Name] = nil
		}
	}
	return in
}

func join(xs []string) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += " -> "
		}
		out += x
	}
	return out
}
