package sagactl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// pauseTarget reads --name or --action, exactly one of them.
type pauseTarget struct {
	name, action string
}

func (p *pauseTarget) register(fs *flag.FlagSet) {
	fs.StringVar(&p.name, "name", "", "the saga name whose steps to hold (a child saga has its own name)")
	fs.StringVar(&p.action, "action", "", "the action whose calls to hold, in every saga")
}

func (p *pauseTarget) get() (durable.PauseKind, string, error) {
	switch {
	case p.name != "" && p.action != "":
		return "", "", errors.New("give --name or --action, not both")
	case p.name != "":
		return durable.PauseName, p.name, nil
	case p.action != "":
		return durable.PauseAction, p.action, nil
	}
	return "", "", errors.New("give --name N or --action A")
}

// parseUntil reads --until: an RFC 3339 time, or a duration from now.
func parseUntil(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("--until %q: give an RFC 3339 time (2026-12-02T18:00:00Z) or a positive duration (2h)", s)
	}
	return now.Add(d), nil
}

func runPause(c *Config, args []string) int {
	fs := flag.NewFlagSet("pause", flag.ContinueOnError)
	var target pauseTarget
	target.register(fs)
	until := fs.String("until", "", "end the pause by itself at this RFC 3339 time, or after this duration (2h); default: until sagactl unpause")
	comps := fs.Bool("compensations", false, "hold the matching compensations too (by default they run, so failing and cancelled sagas still undo their steps)")
	list := fs.Bool("list", false, "list the pauses instead (as sagactl pauses)")
	asJSON := fs.Bool("json", false, "with --list: print the pauses as JSON")
	var stack stackFlags
	stack.register(fs)
	if code, ok := c.flagsOnly(fs, args); !ok {
		return code
	}
	if *list {
		return c.listPauses(&stack, *asJSON)
	}
	kind, name, err := target.get()
	if err != nil {
		c.errorf("pause: %v", err)
		return ExitUsage
	}
	end, err := parseUntil(*until, time.Now())
	if err != nil {
		c.errorf("pause: %v", err)
		return ExitUsage
	}
	return c.withClient(&stack, func(ctx context.Context, cl *client.Client) error {
		if err := cl.Pause(ctx, &engine.PauseParams{Kind: kind, Target: name, Until: end, Compensations: *comps}); err != nil {
			return err
		}
		fmt.Fprintf(c.Stdout, "paused %s %s%s: its steps are deferred (no attempt spent) within %s; %s unpause --%s %s lifts it\n",
			kind, name, untilText(end), engine.PauseTTL, c.Name, kind, name)
		return nil
	})
}

func runUnpause(c *Config, args []string) int {
	fs := flag.NewFlagSet("unpause", flag.ContinueOnError)
	var target pauseTarget
	target.register(fs)
	var stack stackFlags
	stack.register(fs)
	if code, ok := c.flagsOnly(fs, args); !ok {
		return code
	}
	kind, name, err := target.get()
	if err != nil {
		c.errorf("unpause: %v", err)
		return ExitUsage
	}
	return c.withClient(&stack, func(ctx context.Context, cl *client.Client) error {
		if err := cl.Unpause(ctx, kind, name); err != nil {
			if errors.Is(err, durable.ErrNotFound) {
				return fmt.Errorf("no pause of %s %s (%s pauses lists them)", kind, name, c.Name)
			}
			return err
		}
		fmt.Fprintf(c.Stdout, "unpaused %s %s: its deferred steps run within %s\n", kind, name, engine.PausePoll+engine.PauseTTL)
		return nil
	})
}

func runPauses(c *Config, args []string) int {
	fs := flag.NewFlagSet("pauses", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the pauses as JSON")
	var stack stackFlags
	stack.register(fs)
	if code, ok := c.flagsOnly(fs, args); !ok {
		return code
	}
	return c.listPauses(&stack, *asJSON)
}

// pauseReport is one pause as listed.
type pauseListed struct {
	Kind          durable.PauseKind `json:"kind"`
	Target        string            `json:"target"`
	Until         *time.Time        `json:"until,omitempty"`
	Compensations bool              `json:"compensations,omitempty"`
	CreatedAt     time.Time         `json:"created_at"`
	Expired       bool              `json:"expired,omitempty"`
}

func (c *Config) listPauses(stack *stackFlags, asJSON bool) int {
	return c.withClient(stack, func(ctx context.Context, cl *client.Client) error {
		ps, err := cl.Pauses(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		out := make([]pauseListed, len(ps))
		for i, p := range ps {
			out[i] = pauseListed{Kind: p.Kind, Target: p.Target, Compensations: p.Compensations, CreatedAt: p.CreatedAt, Expired: !p.Active(now)}
			if !p.Until.IsZero() {
				u := p.Until
				out[i].Until = &u
			}
		}
		if asJSON {
			enc := json.NewEncoder(c.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		}
		if len(out) == 0 {
			fmt.Fprintln(c.Stdout, "no pauses")
			return nil
		}
		for _, p := range out {
			line := fmt.Sprintf("%s %s", p.Kind, p.Target)
			if p.Until != nil {
				line += untilText(*p.Until)
			}
			if p.Compensations {
				line += ", compensations too"
			}
			if p.Expired {
				line += " (expired: holds nothing)"
			}
			fmt.Fprintf(c.Stdout, "%s, since %s\n", line, p.CreatedAt.UTC().Format(time.RFC3339))
		}
		return nil
	})
}

func untilText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " until " + t.UTC().Format(time.RFC3339)
}

// pausedByReport is the operator's pause that holds a saga's next step.
type pausedByReport struct {
	Kind   durable.PauseKind `json:"kind"`
	Target string            `json:"target"`
	Until  *time.Time        `json:"until,omitempty"`
}

func pausedByOf(ctx context.Context, cl *client.Client, st *saga.State) *pausedByReport {
	p, ok, err := cl.PausedBy(ctx, st)
	if err != nil || !ok {
		return nil
	}
	return reportPause(p)
}

// reportPause is p as status and list report it.
func reportPause(p durable.Pause) *pausedByReport {
	r := &pausedByReport{Kind: p.Kind, Target: p.Target}
	if !p.Until.IsZero() {
		u := p.Until
		r.Until = &u
	}
	return r
}

// timeOrZero is *t, or the zero time for nil.
func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func (p *pausedByReport) text() string {
	s := fmt.Sprintf("paused (by %s %s", p.Kind, p.Target)
	if p.Until != nil {
		s += untilText(*p.Until)
	}
	return s + "): its next step is deferred, no attempt spent"
}
