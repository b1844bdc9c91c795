package sagactl

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func runPlan(c *Config, args []string) int {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	input := fs.String("input", "", "saga input: JSON, or @FILE (default: zero values of the declared fields)")
	var fails, signals stringList
	fs.Var(&fails, "fail", "the step (or STEP.compensate) that fails for good; repeatable")
	fs.Var(&signals, "signal", "NAME=JSON or NAME=@FILE: the payload the awaits of signal NAME get (default: null); repeatable")
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
	payloads, ok := c.signalPayloads(plan, signals)
	if !ok {
		return ExitUsage
	}
	path, comps, st, err := simulate(plan, checked, failing, payloads)
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
	if ls, ok := plan.Step(st.Failure.Step); ok && ls.Kind == lang.KindAction && plan.Definition().OnFailure == lang.OnFailureHold {
		fmt.Fprintf(c.Stdout, "on_failure: hold: the saga is held first, for an operator to retry %s (%s retry ID) or compensate (%s compensate ID, or the hold's end):\n", ls.ID, c.Name, c.Name)
	}
	writePlan(c.Stdout, plan, st, what, path, comps)
	if assumed := pausesOn(plan, path, payloads); len(assumed) > 0 {
		fmt.Fprintf(c.Stdout, "(the plan assumes %s)\n", strings.Join(assumed, ", and "))
	}
	return ExitOK
}

// writePlan tells what compensation does after the failure, from what the
// dry run did: each compensation that ran and how it ended, those a failed
// one kept from running, and the end, so that the lines cannot disagree.
func writePlan(w io.Writer, plan *saga.Plan, st *saga.State, what string, path []string, comps []saga.StepRecord) {
	if len(comps) == 0 {
		fmt.Fprintf(w, "if %s (path: %s), nothing is compensated: no completed step declares compensate\n", what, join(path))
	} else {
		fmt.Fprintf(w, "if %s (path: %s), compensation runs:\n", what, join(path))
	}
	for i, rec := range comps {
		line := fmt.Sprintf("  %d. undo %s: %s", i+1, rec.Step, compAction(plan, rec.Step))
		if rec.Outcome == saga.OutcomeCompensationFailed {
			line += ": fails for good"
			if rec.Error != nil {
				line += " (" + rec.Error.Type + ": " + rec.Error.Message + ")"
			}
		}
		fmt.Fprintln(w, line)
	}
	if st.Status == durable.StatusCompensationFailed {
		// The stack keeps what is still to undo, newest last; the
		// compensation that failed may still be on top.
		failed := ""
		if n := len(comps); n > 0 && comps[n-1].Outcome == saga.OutcomeCompensationFailed {
			failed = comps[n-1].Step
		}
		var left []string
		defs := plan.Steps()
		for i := len(st.Stack) - 1; i >= 0; i-- {
			id := defs[st.Stack[i].Step].ID
			if i == len(st.Stack)-1 && id == failed {
				continue
			}
			left = append(left, "undo "+id)
		}
		if len(left) > 0 {
			fmt.Fprintf(w, "  not run: %s (compensation stops at the first that fails)\n", strings.Join(left, ", "))
		}
		fmt.Fprintf(w, "the saga ends %s, parked for an operator\n", st.Status)
		return
	}
	fmt.Fprintf(w, "the saga ends %s\n", st.Status)
}

// pausesOn says what the dry run took for granted on the path: each await
// got its signal, each callback was completed with its action's output.
func pausesOn(plan *saga.Plan, path []string, signals map[string]any) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range path {
		s, ok := plan.Step(id)
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		switch {
		case s.Kind == lang.KindAwait:
			if _, given := signals[s.Await.Signal]; given {
				out = append(out, fmt.Sprintf("await %s gets its signal %s with the payload of --signal", s.ID, s.Await.Signal))
			} else {
				out = append(out, fmt.Sprintf("await %s gets its signal %s with no payload: give one with --signal %s=JSON", s.ID, s.Await.Signal, s.Await.Signal))
			}
		case s.Callback != nil:
			out = append(out, fmt.Sprintf("the callback of %s is completed with its action's output", s.ID))
		}
	}
	return out
}

// signalPayloads reads the --signal flags of a dry run (plan, cost): each
// signal's payload by name, as plain values.
func (c *Config) signalPayloads(plan *saga.Plan, args []string) (map[string]any, bool) {
	sigs, ok := c.readSignals(plan, args)
	if !ok {
		return nil, false
	}
	payloads := map[string]any{}
	for _, sg := range sigs {
		v, err := plainPayload(sg.payload)
		if err != nil {
			c.errorf("--signal %s: %v", sg.name, err)
			return nil, false
		}
		payloads[sg.name] = v
	}
	return payloads, true
}

// plainPayload decodes a --signal payload into the plain values a saga holds.
func plainPayload(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return saga.NormalizeJSON(v)
}

func compAction(plan *saga.Plan, id string) string {
	for _, s := range plan.StepsWithChildren() {
		if s.ID == id && s.Compensate != nil {
			return s.Compensate.Action
		}
	}
	return "?"
}

// simulate dry-runs the saga: every action succeeds with its input as
// output, except those in fail. It returns the forward path and how each
// compensation that ran ended, in order.
func simulate(plan *saga.Plan, in map[string]any, fail failSet, signals map[string]any) ([]string, []saga.StepRecord, *saga.State, error) {
	var (
		path  []string
		comps []saga.StepRecord
	)
	st, err := plan.DryRun(saga.DryRunParams{
		Input:   in,
		Act:     fail.act,
		Signals: signals,
		OnStep: func(rec saga.StepRecord) {
			switch {
			case !rec.Compensation && rec.Outcome != saga.OutcomeStarted && rec.Outcome != saga.OutcomeWaiting:
				path = append(path, rec.Step)
			case rec.Compensation && lang.IsFork(rec.Kind) && rec.Outcome != saga.OutcomeCompensationFailed:
				// A fork's undo is its children's compensations, listed
				// as they run.
			case rec.Compensation && (rec.Outcome == saga.OutcomeCompensated || rec.Outcome == saga.OutcomeCompensationFailed):
				comps = append(comps, rec)
			}
		},
	})
	return path, comps, st, err
}

func zeroInput(def *lang.Definition) map[string]any {
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
