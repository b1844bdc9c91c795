package sagactl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// historyReport is the JSON shape of `sagactl history --json`
// (docs/PROTOCOL.md, "History"). Fields are only ever added.
type historyReport struct {
	SagaID    string         `json:"saga_id"`
	Saga      string         `json:"saga"`
	Status    durable.Status `json:"status"`
	Version   uint64         `json:"version"`
	CreatedAt time.Time      `json:"created_at"`
	// Parent is where a child run of a fork comes from.
	Parent *parentReport `json:"parent,omitempty"`
	// Dropped counts the older entries dropped to keep the history
	// within its bound.
	Dropped uint64               `json:"dropped"`
	Entries []historyEntryReport `json:"entries"`
}

// historyEntryReport is one entry of historyReport: a step of a
// transition, or a transition that went through no step.
type historyEntryReport struct {
	Version uint64    `json:"version"`
	At      time.Time `json:"at"`
	// Cause is what made the transition: start, result, timer, join,
	// undo, undone; or, from outside, cancel, resume, signal, callback.
	Cause       string         `json:"cause"`
	FromOutside bool           `json:"from_outside,omitempty"`
	Status      durable.Status `json:"status,omitempty"` // the status the transition moved the saga to
	Step        string         `json:"step,omitempty"`
	Kind        lang.StepKind  `json:"kind,omitempty"`
	// Compensation: the entry is of the step's compensation.
	Compensation bool             `json:"compensation,omitempty"`
	Outcome      saga.StepOutcome `json:"outcome,omitempty"`
	Attempt      int              `json:"attempt,omitempty"`
	// TookMS is the action call's duration, on the entry of its result.
	TookMS  *int64          `json:"took_ms,omitempty"`
	DelayMS int64           `json:"delay_ms,omitempty"` // before the next attempt, when retrying
	Error   *saga.StepError `json:"error,omitempty"`
	Signal  string          `json:"signal,omitempty"` // a kept signal's name
	// Fork is a fork step's visit and children; the children's ids are
	// SAGA_ID.STEP.SEQ.INDEX, and ChildID the one an entry of the fork's
	// compensation undoes.
	Fork *forkReport `json:"fork,omitempty"`
}

type forkReport struct {
	Seq      uint64 `json:"seq"`
	Children int    `json:"children"`
	ChildID  string `json:"child_id,omitempty"`
}

func runHistory(c *Config, args []string) int {
	fs := flag.NewFlagSet("history", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the history as JSON (docs/PROTOCOL.md, \"History\")")
	var stack stackFlags
	stack.register(fs)
	ids, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	if len(ids) != 1 {
		c.errorf("history: name exactly one saga id (got %d)", len(ids))
		return ExitUsage
	}
	if !durable.ValidSagaID(ids[0]) {
		c.errorf("history: not a saga id (%d bytes): use 1 to 128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit", len(ids[0]))
		return ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := stack.client(ctx, c.APIOptions...)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	st, err := cl.Status(ctx, ids[0])
	if err != nil {
		c.errorf("history: %v", err)
		return ExitUsage
	}
	plan, err := cl.Plan(ctx, st)
	if err != nil {
		// Steps show by index: the history is still worth reading.
		c.errorf("history: the saga's definition: %v (steps are shown by index)", err)
		plan = nil
	}
	entries, herr := st.HistoryEntries(plan)
	hideSecrets(plan, st, entries)
	r := historyReportOf(st, entries)
	if *asJSON {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
	} else {
		printHistory(c.Stdout, r)
	}
	if herr != nil {
		c.errorf("history: the rest is damaged: %v", herr)
		return ExitUsage
	}
	return ExitOK
}

func historyReportOf(st *saga.State, entries []saga.HistoryEntry) historyReport {
	r := historyReport{SagaID: st.SagaID, Saga: st.Name, Status: st.Status, Version: st.Version, CreatedAt: st.CreatedAt,
		Dropped: st.HistoryDropped, Entries: []historyEntryReport{}}
	if l := st.Parent; l != nil {
		r.Parent = &parentReport{SagaID: l.ID, Step: l.Step, Index: l.Index}
	}
	for _, e := range entries {
		er := historyEntryReport{Version: e.Version, At: e.At, Cause: e.Cause.String(), FromOutside: e.FromOutside(), Status: e.Status,
			Step: e.Step, Kind: e.Kind, Compensation: e.Compensation, Outcome: e.Outcome, Attempt: e.Attempt,
			DelayMS: e.Delay.Milliseconds(), Error: e.Error, Signal: e.Signal}
		if er.Step == "" && e.StepIndex >= 0 {
			er.Step = fmt.Sprintf("#%d", e.StepIndex) // the definition could not be read
		}
		if e.Timed {
			ms := e.Took.Milliseconds()
			er.TookMS = &ms
		}
		if f := e.Fork; f != nil {
			er.Fork = &forkReport{Seq: f.Seq, Children: f.Children}
			if e.Compensation {
				er.Fork.ChildID = durable.ChildID(st.SagaID, e.Step, f.Seq, f.Child)
			}
		}
		r.Entries = append(r.Entries, er)
	}
	return r
}

// printHistory prints the history as a timeline: a transition's version,
// time after the start, cause and new status on its first row, then a
// row a step.
func printHistory(w io.Writer, r historyReport) {
	fmt.Fprintf(w, "saga %s (%s): %s, version %d, started %s\n", r.SagaID, r.Saga, r.Status, r.Version, r.CreatedAt.Format(time.RFC3339Nano))
	if p := r.Parent; p != nil {
		fmt.Fprintf(w, "  child %d of %s's %s\n", p.Index, p.SagaID, p.Step)
	}
	if r.Dropped > 0 {
		fmt.Fprintf(w, "  %d older entries dropped (the history keeps the newest within its bound)\n", r.Dropped)
	}
	if len(r.Entries) == 0 {
		fmt.Fprintln(w, "  no history (a saga written before histories were kept, or by functions that keep none)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tAT\tCAUSE\tSTATUS\tSTEP\tOUTCOME\tATTEMPT\tTOOK\tDETAIL")
	for i, e := range r.Entries {
		version, at, cause, status := "", "", "", ""
		if i == 0 || e.Version != r.Entries[i-1].Version || e.Cause != r.Entries[i-1].Cause || !e.At.Equal(r.Entries[i-1].At) {
			version, at, cause, status = fmt.Sprint(e.Version), "+"+e.At.Sub(r.CreatedAt).Round(time.Millisecond).String(), e.Cause, string(e.Status)
			if e.FromOutside {
				cause += " (outside)"
			}
		}
		step, outcome, attempt, took := e.Step, string(e.Outcome), "", ""
		if e.Compensation {
			step = "undo " + step
		}
		if step == "" {
			step, outcome = "-", "-"
		}
		if e.Attempt > 0 {
			attempt = fmt.Sprint(e.Attempt)
		}
		if e.TookMS != nil {
			took = (time.Duration(*e.TookMS) * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", version, at, cause, status, step, outcome, attempt, took, detail(r.SagaID, e))
	}
	_ = tw.Flush()
}

// detail is what else an entry says: its error, a retry's delay, a kept
// signal, a fork's children.
func detail(sagaID string, e historyEntryReport) string {
	var parts []string
	if e.Error != nil {
		parts = append(parts, e.Error.Type+": "+strings.ReplaceAll(e.Error.Message, "\n", " "))
	}
	if e.DelayMS > 0 {
		parts = append(parts, "next attempt in "+(time.Duration(e.DelayMS)*time.Millisecond).String())
	}
	if e.Signal != "" {
		parts = append(parts, "signal "+e.Signal)
	}
	if f := e.Fork; f != nil {
		switch {
		case f.ChildID != "":
			parts = append(parts, "child "+f.ChildID)
		case f.Children == 1:
			parts = append(parts, "child "+durable.ChildID(sagaID, e.Step, f.Seq, 0))
		default:
			parts = append(parts, fmt.Sprintf("%d children: %s .. %s", f.Children, durable.ChildID(sagaID, e.Step, f.Seq, 0), durable.ChildID(sagaID, e.Step, f.Seq, f.Children-1)))
		}
	}
	return strings.Join(parts, "; ")
}

// hideSecrets masks the saga's secret inputs in the entries' error
// messages; without the definition, which says what is secret, it hides
// the messages whole.
func hideSecrets(plan *saga.Plan, st *saga.State, entries []saga.HistoryEntry) {
	var red *saga.Redactor
	if plan != nil {
		red = plan.Redactor(st)
	}
	for i, e := range entries {
		switch {
		case e.Error == nil:
		case plan == nil:
			hidden := *e.Error
			hidden.Message = "[hidden: the saga's definition, which says what is secret, could not be read]"
			entries[i].Error = &hidden
		default:
			entries[i].Error = red.StepError(e.Error)
		}
	}
}
