package sagactl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// limitArgs is limit's usage line.
const limitArgs = "set ACTION [--rate N/s] [--burst N] [--concurrency N] | list [--json] | unset ACTION " + stackArgs

// runLimit sets, lists and unsets action limits (docs/PROTOCOL.md,
// "Limits"): set ACTION, list, unset ACTION.
func runLimit(c *Config, args []string) int {
	fs := flag.NewFlagSet("limit", flag.ContinueOnError)
	rate := fs.String("rate", "", "calls a second, across every saga and worker: N/s (or N); at most "+strconv.Itoa(durable.MaxLimitRate))
	burst := fs.Int("burst", 0, "calls that may start in one window of BURST/RATE seconds (default a tenth of the rate, at least 1)")
	conc := fs.Int("concurrency", 0, "calls in flight at once; at most "+strconv.Itoa(durable.MaxLimitConcurrency))
	asJSON := fs.Bool("json", false, "list as JSON")
	var stack stackFlags
	stack.register(fs)
	rest, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	verb, names := "", []string(nil)
	if len(rest) > 0 {
		verb, names = rest[0], rest[1:]
	}
	var l durable.Limit
	switch {
	case verb == "list" && len(names) == 0:
	case (verb == "set" || verb == "unset") && len(names) == 1:
		l.Action = names[0]
	default:
		c.errorf("limit: use %s limit %s", c.Name, limitArgs)
		return ExitUsage
	}
	if verb == "set" {
		n, err := parseRate(*rate)
		if err != nil {
			c.errorf("limit: --rate %q: %v", *rate, err)
			return ExitUsage
		}
		l.Rate, l.Burst, l.Concurrency = n, *burst, *conc
		if err := l.Check(); err != nil {
			c.errorf("%v", err)
			return ExitUsage
		}
	}
	return c.withClient(&stack, func(ctx context.Context, cl *client.Client) error {
		switch verb {
		case "set":
			if err := cl.SetLimit(ctx, l); err != nil {
				return fmt.Errorf("limit set: %w", err)
			}
			fmt.Fprintf(c.Stdout, "limit of %s set: %s; every worker enforces it within %s\n", l.Action, l.Describe(), engine.LimitsTTL)
		case "unset":
			err := cl.UnsetLimit(ctx, l.Action)
			if errors.Is(err, durable.ErrNotFound) {
				return fmt.Errorf("limit: %s has no limit", l.Action)
			}
			if err != nil {
				return fmt.Errorf("limit unset: %w", err)
			}
			fmt.Fprintf(c.Stdout, "limit of %s unset; every worker runs it unlimited within %s\n", l.Action, engine.LimitsTTL)
		default:
			if err := c.listLimits(ctx, cl, *asJSON); err != nil {
				return fmt.Errorf("limit list: %w", err)
			}
		}
		return nil
	})
}

// parseRate reads "50/s" or "50".
func parseRate(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(s, "/s"))
	if err != nil || n < 1 {
		return 0, errors.New("a rate is a whole number of calls a second, 1 or more: 50/s")
	}
	return n, nil
}

// limitReport is the JSON shape of one limit.
type limitReport struct {
	Action      string `json:"action"`
	Rate        int    `json:"rate,omitempty"`
	Burst       int    `json:"burst,omitempty"`
	WindowMS    int64  `json:"window_ms,omitempty"`
	Concurrency int    `json:"concurrency,omitempty"`
}

func (c *Config) listLimits(ctx context.Context, cl *client.Client, asJSON bool) error {
	ls, err := cl.Limits(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		out := make([]limitReport, len(ls))
		for i, l := range ls {
			out[i] = limitReport{Action: l.Action, Rate: l.Rate, Burst: l.Burst, WindowMS: l.Window().Milliseconds(), Concurrency: l.Concurrency}
			if l.Rate > 0 && l.Burst == 0 {
				out[i].Burst = durable.DefaultBurst(l.Rate)
			}
		}
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(ls) == 0 {
		fmt.Fprintln(c.Stdout, "no action has a limit")
		return nil
	}
	w := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ACTION\tLIMIT")
	for _, l := range ls {
		fmt.Fprintf(w, "%s\t%s\n", l.Action, l.Describe())
	}
	return w.Flush()
}

// Limits, SetLimit and UnsetLimit give the console its Limits page
// (console.Limits).
func (s clientSource) Limits(ctx context.Context) ([]durable.Limit, error) {
	return s.cl.Limits(ctx)
}

func (s clientSource) SetLimit(ctx context.Context, l durable.Limit) error {
	return s.cl.SetLimit(ctx, l)
}

func (s clientSource) UnsetLimit(ctx context.Context, action string) error {
	return s.cl.UnsetLimit(ctx, action)
}
