package sagactl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/bulk"
)

// bulkArgs is the usage of a verb's filter form, after its single-id
// form: cancel ID | cancel --name N ...
const bulkArgs = "--status S --name N [--since D] [--all] [--dry-run] [--yes] [--json]"

// bulkFlags are the flags that make a verb act on the sagas a filter
// matches rather than on one id.
var bulkFlags = []string{"status", "name", "since", "all", "dry-run", "yes"}

// isBulk reports whether args give a bulk flag: the command acts on a
// filter (runBulk). A verb with a single-id form calls it first; its
// --help goes there too, whose flags are a superset of the single form's.
func isBulk(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (slices.Contains(bulkFlags, name) || name == "h" || name == "help") {
			return true
		}
	}
	return false
}

// bulkPreview is how many of the matches a confirmation names.
const bulkPreview = 10

// runBulk runs verb (bulk.Verbs) on every saga its filter matches.
func runBulk(c *Config, verb string, args []string) int {
	v, ok := bulk.VerbNamed(verb)
	if !ok {
		c.errorf("%s: no bulk form", verb)
		return ExitUsage
	}
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	var statuses []string
	for _, s := range v.Statuses {
		statuses = append(statuses, string(s))
	}
	status := fs.String("status", "", "act on the sagas in this status: "+strings.Join(statuses, " or ")+" (default: each)")
	name := fs.String("name", "", "act on the sagas of this name (the definition's saga:); the listing is read and filtered here, so the sagas it drops are read and billed too")
	since := fs.Duration("since", 0, "act on the sagas that entered their status within this long of now (e.g. 30m, 24h)")
	all := fs.Bool("all", false, "with neither --status nor --name: act on every saga "+strings.Join(statuses, " or "))
	dryRun := fs.Bool("dry-run", false, "list the sagas it would act on, and act on none")
	yes := fs.Bool("yes", false, "act without asking (a terminal is asked to confirm the count; without one, --yes is required)")
	asJSON := fs.Bool("json", false, "print the saga as JSON; with a filter, the summary")
	skip := new(bool)
	if verb == "resume" { // its single-id form's flag, refused with a filter
		fs.BoolVar(skip, "skip", false, "resume ID only: do not run the compensation that failed: you undid that step by hand")
	}
	var stack stackFlags
	stack.register(fs)
	ids, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	p := bulk.Params{Verb: v, Status: durable.Status(*status), Name: *name, All: *all, DryRun: *dryRun}
	switch {
	case len(ids) > 0:
		c.errorf("%s: give a saga id or a filter (--status, --name, --since), not both", verb)
		return ExitUsage
	case *skip:
		c.errorf("%s: --skip skips one saga's failed compensation, undone by hand: give its id, not a filter", verb)
		return ExitUsage
	case *since < 0:
		c.errorf("%s: --since must not be negative (it keeps the sagas that entered their status within that long of now)", verb)
		return ExitUsage
	case *dryRun && *yes:
		c.errorf("%s: --dry-run acts on nothing: drop --yes", verb)
		return ExitUsage
	}
	if *since > 0 {
		p.After = time.Now().Add(-*since)
	}
	if err := p.Check(); errors.Is(err, bulk.ErrTooBroad) {
		c.errorf("%s: %v; or --all", verb, err)
		return ExitUsage
	} else if err != nil {
		c.errorf("%s: %v", verb, err)
		return ExitUsage
	}
	// Until SIGINT or SIGTERM: a run stopped so prints what it did, and
	// the same command goes on.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cl, err := stack.client(ctx, c.APIOptions...)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	return c.bulk(ctx, cl.Bulk, p, *yes, *asJSON)
}

// bulk runs p with run: without yes (and not a dry run), first as a dry
// run, whose count and first matches a terminal confirms; without a
// terminal it refuses. Progress goes to stderr a page at a time, the
// summary to stdout. It exits 1 when a saga failed or the run stopped.
func (c *Config) bulk(ctx context.Context, run func(context.Context, bulk.Params) (*bulk.Result, error), p bulk.Params, yes, asJSON bool) int {
	verb := p.Verb.Name
	total := -1 // unknown without a dry run first
	if !p.DryRun && !yes {
		dry := p
		dry.DryRun = true
		res, err := run(ctx, dry)
		if err != nil {
			c.errorf("%s: %v", verb, err)
			return ExitUsage
		}
		if res.Matched == 0 {
			return c.bulkSummary(res, nil, asJSON)
		}
		fmt.Fprintf(c.Stderr, "%s: %d sagas match: %s", verb, res.Matched, strings.Join(res.SagaIDs[:min(bulkPreview, len(res.SagaIDs))], " "))
		if n := len(res.SagaIDs) - bulkPreview; n > 0 {
			fmt.Fprintf(c.Stderr, " and %d more", n)
		}
		fmt.Fprintln(c.Stderr)
		in, interactive := c.terminal()
		if !interactive {
			c.errorf("%s: not acting on %d sagas without a confirmation, and stdin is not a terminal: give --yes (--dry-run lists them)", verb, res.Matched)
			return ExitUsage
		}
		fmt.Fprintf(c.Stderr, "%s these %d sagas? Type yes to go on: ", verb, res.Matched)
		answer, _ := bufio.NewReader(in).ReadString('\n')
		if strings.TrimSpace(answer) != "yes" {
			c.errorf("%s: not confirmed: nothing done", verb)
			return ExitUsage
		}
		total = res.Matched
	}
	p.Progress = func(pr bulk.Progress) {
		if !pr.PageDone || p.DryRun {
			return
		}
		done := pr.Acted + pr.Skipped + pr.Failed
		of := ""
		if total >= 0 {
			of = fmt.Sprintf(" of %d", total)
		}
		fmt.Fprintf(c.Stderr, "%s: %d%s (page %d of %s, %d read): %d acted, %d skipped, %d failed\n", verb, done, of, pr.Pages, pr.Status, pr.Read, pr.Acted, pr.Skipped, pr.Failed)
	}
	res, err := run(ctx, p)
	if res == nil {
		c.errorf("%s: %v", verb, err)
		return ExitUsage
	}
	return c.bulkSummary(res, err, asJSON)
}

// bulkReport is the JSON summary of a bulk run.
type bulkReport struct {
	*bulk.Result
	Acted int `json:"acted"`
	// Stopped is why the run stopped before the end; absent when it
	// went through.
	Stopped string `json:"stopped,omitempty"`
}

func (c *Config) bulkSummary(res *bulk.Result, stopped error, asJSON bool) int {
	code := ExitOK
	if stopped != nil || len(res.Failed) > 0 {
		code = ExitUsage
	}
	if asJSON {
		r := bulkReport{Result: res, Acted: res.Acted()}
		if stopped != nil {
			r.Stopped = stopped.Error()
		}
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
		return code
	}
	switch {
	case res.Matched == 0:
		fmt.Fprintf(c.Stdout, "%s: no sagas match (%d read)\n", res.Verb, res.Read)
	case res.DryRun:
		fmt.Fprintf(c.Stdout, "%s would act on %d sagas (%d read), acting on none:\n", res.Verb, res.Matched, res.Read)
		for _, id := range res.SagaIDs {
			fmt.Fprintf(c.Stdout, "  %s\n", id)
		}
	default:
		fmt.Fprintf(c.Stdout, "%s: %d acted, %d skipped, %d failed (%d matched, %d read)\n", res.Verb, res.Acted(), len(res.Skipped), len(res.Failed), res.Matched, res.Read)
		for _, o := range res.Skipped {
			fmt.Fprintf(c.Stdout, "  skipped %s: %s\n", o.SagaID, o.Reason)
		}
		for _, o := range res.Failed {
			fmt.Fprintf(c.Stdout, "  failed %s: %s\n", o.SagaID, o.Reason)
		}
	}
	if stopped != nil {
		c.errorf("%s: stopped: %v; the same command goes on (what was done is skipped)", res.Verb, stopped)
	}
	return code
}

// terminal returns where a confirmation is read, and whether it can be:
// Config.Stdin when it is a terminal, or a reader that is no file (a
// test's).
func (c *Config) terminal() (io.Reader, bool) {
	in := c.Stdin
	if in == nil {
		in = os.Stdin
	}
	f, ok := in.(*os.File)
	if !ok {
		return in, true
	}
	fi, err := f.Stat()
	return in, err == nil && fi.Mode()&os.ModeCharDevice != 0
}
