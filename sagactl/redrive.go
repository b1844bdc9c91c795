package sagactl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/console"
	"github.com/lambdasaga/lambdasaga/internal/redrive"
)

// redriveArgs is redrive's usage line.
const redriveArgs = "[--queue advance|compensate|start]... [--max N] [--dry-run] [--include-refused] [--json] [--start-queue-url U] " + stackArgs

// redriveProgressEvery spaces redrive's progress lines.
const redriveProgressEvery = 2 * time.Second

// maxReasonsShown bounds the refusal reasons a summary lists.
const maxReasonsShown = 10

func runRedrive(c *Config, args []string) int {
	fs := flag.NewFlagSet("redrive", flag.ContinueOnError)
	var queues stringList
	fs.Var(&queues, "queue", "a queue whose dead letters go back: advance, compensate or start (repeat, or a comma list; default: all)")
	maxMoved := fs.Int("max", 0, "move at most N letters over all queues, one at a time (0: all)")
	dryRun := fs.Bool("dry-run", false, "count the dead letters, move none")
	includeRefused := fs.Bool("include-refused", false, "move the start queue's refused requests too (they carry a lambdasaga-reason; redriven, most are refused again: fix the cause first)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	var stack stackFlags
	stack.register(fs)
	stack.registerStartQueue(fs)
	if code, ok := c.flagsOnly(fs, args); !ok {
		return code
	}
	p := client.RedriveParams{Params: redrive.Params{Max: *maxMoved, DryRun: *dryRun, IncludeRefused: *includeRefused}}
	for _, list := range queues {
		for name := range strings.SplitSeq(list, ",") {
			q, err := redrive.ParseQueue(strings.TrimSpace(name))
			if err != nil {
				c.errorf("redrive --queue: %v", err)
				return ExitUsage
			}
			p.Queues = append(p.Queues, q)
		}
	}
	if *maxMoved < 0 {
		c.errorf("redrive: --max must not be negative (0 moves every letter)")
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cl, err := stack.client(ctx, c.APIOptions...)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	if !*asJSON {
		var last time.Time
		p.Progress = func(pr redrive.Progress) {
			if now := time.Now(); now.Sub(last) >= redriveProgressEvery {
				last = now
				fmt.Fprintf(c.Stderr, "%s redrive: %s: %s\n", c.Name, pr.Queue, progressText(pr))
			}
		}
	}
	res, err := cl.Redrive(ctx, &p)
	if res == nil {
		c.errorf("redrive: %v", err)
		return ExitUsage
	}
	if *asJSON {
		out, _ := json.MarshalIndent(redriveReportOf(res), "", "  ")
		fmt.Fprintln(c.Stdout, string(out))
	} else {
		c.printRedrive(res)
	}
	if err != nil {
		c.errorf("redrive: %v", err)
		return ExitUsage
	}
	return ExitOK
}

func progressText(pr redrive.Progress) string {
	s := fmt.Sprintf("%d moved so far", pr.Moved)
	if pr.ToMove > 0 {
		s += fmt.Sprintf(" of about %d", pr.ToMove)
	}
	if pr.Skipped > 0 {
		s += fmt.Sprintf(", %d refused left", pr.Skipped)
	}
	return s
}

// printRedrive prints a line per queue and the total.
func (c *Config) printRedrive(res *redrive.Result) {
	w := c.Stdout
	for _, q := range res.Queues {
		fmt.Fprintf(w, "%s: %s\n", q.Queue, depthText(q.Before))
		if res.DryRun {
			if q.Queue == redrive.Start && q.Before.Visible > 0 {
				fmt.Fprintf(w, "  refused requests among them stay unless --include-refused; a redrive lists their reasons\n")
			}
			continue
		}
		how := "one at a time"
		switch {
		case q.ByTask:
			how = "by an SQS message move task"
		case q.Unsupported:
			how = "one at a time: the queue service has no message move task"
		}
		if q.Moved > 0 || q.Err == nil && q.Skipped == 0 && q.Before.Visible > 0 {
			fmt.Fprintf(w, "  %d moved back (%s)\n", q.Moved, how)
		}
		if q.Skipped > 0 {
			fmt.Fprintf(w, "  %d refused left in the dead-letter queue (--include-refused moves them)\n", q.Skipped)
		}
		if len(q.Reasons) > 0 {
			fmt.Fprintf(w, "  refusal reasons:\n")
			for i, r := range q.Reasons {
				if i == maxReasonsShown {
					fmt.Fprintf(w, "    ... and %d other reasons\n", len(q.Reasons)-i)
					break
				}
				fmt.Fprintf(w, "    %6d  %s\n", r.Count, r.Reason)
			}
		}
		if q.Err != nil {
			fmt.Fprintf(w, "  stopped: %v\n", q.Err)
		}
	}
	for _, q := range res.Missing {
		fmt.Fprintf(w, "%s: not looked at: give --start-queue-url (the stack output StartQueueUrl)\n", q)
	}
	if res.DryRun {
		fmt.Fprintf(w, "dry run: nothing moved\n")
		return
	}
	fmt.Fprintf(w, "%d moved back in all\n", res.Moved)
}

func depthText(d redrive.Depth) string {
	s := "no dead letters"
	switch d.Visible {
	case 0:
	case 1:
		s = "1 dead letter"
	default:
		s = fmt.Sprintf("%d dead letters", d.Visible)
	}
	if d.InFlight > 0 {
		s += fmt.Sprintf(" (and %d in flight: received by a redrive or a reader, back after their visibility timeout unless deleted)", d.InFlight)
	}
	return s
}

// redriveReport is redrive's JSON.
type redriveReport struct {
	DryRun  bool                 `json:"dry_run,omitempty"`
	Moved   int                  `json:"moved"`
	Queues  []redriveQueueReport `json:"queues"`
	Missing []redrive.Queue      `json:"not_looked_at,omitempty"`
}

type redriveQueueReport struct {
	Queue    redrive.Queue         `json:"queue"`
	Visible  int                   `json:"dead_letters"`
	InFlight int                   `json:"in_flight,omitempty"`
	Moved    int                   `json:"moved"`
	Skipped  int                   `json:"refused_left,omitempty"`
	Reasons  []redrive.ReasonCount `json:"reasons,omitempty"`
	ByTask   bool                  `json:"by_move_task,omitempty"`
	Error    string                `json:"error,omitempty"`
}

func redriveReportOf(res *redrive.Result) redriveReport {
	r := redriveReport{DryRun: res.DryRun, Moved: res.Moved, Missing: res.Missing, Queues: []redriveQueueReport{}}
	for _, q := range res.Queues {
		qr := redriveQueueReport{Queue: q.Queue, Visible: q.Before.Visible, InFlight: q.Before.InFlight, Moved: q.Moved, Skipped: q.Skipped, Reasons: q.Reasons, ByTask: q.ByTask}
		if q.Err != nil {
			qr.Error = q.Err.Error()
		}
		r.Queues = append(r.Queues, qr)
	}
	return r
}

var _ console.DeadLetters = clientSource{}

// Redrive implements console.DeadLetters.
func (s clientSource) Redrive(ctx context.Context, queues []redrive.Queue, p redrive.Params) (*redrive.Result, error) {
	return s.cl.Redrive(ctx, &client.RedriveParams{Queues: queues, Params: p})
}
