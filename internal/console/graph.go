package console

import (
	"fmt"
	"strings"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// StepStatus is how far a step got, as the graph colours it.
type StepStatus string

// The step statuses. A step no entry and no cursor names has none ("").
const (
	StepDone         StepStatus = "done"         // it completed
	StepRunning      StepStatus = "running"      // its action (or a retry) is pending
	StepWaiting      StepStatus = "waiting"      // it waits on a timer, a signal or a callback
	StepFailed       StepStatus = "failed"       // it failed
	StepCompensating StepStatus = "compensating" // its compensation is pending
	StepCompensated  StepStatus = "compensated"  // its compensation completed (or was skipped)
	// StepCompensationFailed: its compensation failed for good; the saga
	// is parked on it until an operator resumes it.
	StepCompensationFailed StepStatus = "compensation_failed"
)

// StepStatuses lists every step status, in the order the legend shows them.
func StepStatuses() []StepStatus {
	return []StepStatus{StepDone, StepRunning, StepWaiting, StepFailed, StepCompensating, StepCompensated, StepCompensationFailed}
}

// Label is the status as the graph and its legend write it.
func (s StepStatus) Label() string {
	if s == StepCompensationFailed {
		return "compensation failed (parked)"
	}
	return string(s)
}

// stepStatuses colours the steps of a saga: the latest history entry of
// each step, then what the state says of now (its pending cursor, its
// failure, its parked compensation), which no history can contradict.
func stepStatuses(plan *saga.Plan, st *saga.State, history []Entry) map[string]StepStatus {
	out := map[string]StepStatus{}
	for _, e := range history {
		if e.Step == "" { // the saga's own entries (Kind "saga", as a saga step's)
			continue
		}
		if s := entryStatus(e); s != "" {
			out[e.Step] = s
		}
	}
	if f := st.Failure; f != nil && f.Step != "" && out[f.Step] == "" {
		out[f.Step] = StepFailed
	}
	if ce := st.CompensationError; ce != nil && ce.Step != "" {
		out[ce.Step] = StepCompensationFailed
	}
	if cur, ok := st.Pending(); ok {
		if id := plan.StepID(cur.Step); id != "" {
			switch {
			case cur.Compensating:
				out[id] = StepCompensating
			case cur.Held:
				out[id] = StepFailed // held on it, for an operator
			case cur.Wait || st.Status == durable.StatusWaiting:
				out[id] = StepWaiting
			default:
				out[id] = StepRunning
			}
		}
	}
	return out
}

// entryStatus is the status a history entry leaves its step in.
func entryStatus(e Entry) StepStatus {
	o := saga.StepOutcome(e.Outcome)
	if e.Compensation {
		switch o {
		case saga.OutcomeCompensated, saga.OutcomeSkipped, saga.OutcomeCompleted:
			return StepCompensated
		case saga.OutcomeCompensationFailed, saga.OutcomeFailed:
			return StepCompensationFailed
		case saga.OutcomeStarted, saga.OutcomeRetrying:
			return StepCompensating
		}
		return ""
	}
	switch o {
	case saga.OutcomeCompleted:
		return StepDone
	case saga.OutcomeStarted, saga.OutcomeRetrying:
		return StepRunning
	case saga.OutcomeWaiting:
		return StepWaiting
	case saga.OutcomeFailed, saga.OutcomeCaught:
		return StepFailed
	case saga.OutcomeCompensated, saga.OutcomeSkipped:
		return StepCompensated
	case saga.OutcomeCompensationFailed:
		return StepCompensationFailed
	}
	return ""
}

// node is one step of the drawn graph.
type node struct {
	ID     string
	Kind   string
	What   string     // what the step does, in a few words
	Status StepStatus // "" when not reached (or run in a child run)
	Undo   string     // its compensation's action; empty when none
	Edges  []string   // where it may go besides the next step: catches, switch cases, next
	Groups []group    // a fork's branches, body or child saga, drawn inside it
	Runs   []string   // a fork's child runs, by saga id: pending, or as its history last names them
}

// group is a list of steps drawn in a box of its own inside a fork.
type group struct {
	Label string
	Steps []node
}

// graphOf lays out the steps of a definition as nested boxes, each step
// with its status. The steps inside a fork run in child runs of their own
// (durable.ChildID), so they are drawn without colour and the fork links
// to its runs: while it waits on them, and once they ended, as the
// history last names them (a child saga's one run, a foreach's first
// iterations).
func graphOf(plan *saga.Plan, st *saga.State, statuses map[string]StepStatus, history []Entry) []node {
	runs := map[string][]string{}
	forks := map[string]*saga.HistoryFork{}
	for _, e := range history {
		if e.Step != "" && e.Fork != nil {
			forks[e.Step] = e.Fork
		}
	}
	for id, f := range forks {
		n := max(f.Children, f.Child+1)
		if s, ok := plan.Step(id); ok && s.Kind == lang.KindSaga {
			n = 1
		}
		for i := range min(n, maxRunLinks) {
			runs[id] = append(runs[id], durable.ChildID(st.SagaID, id, f.Seq, i))
		}
	}
	if cur, ok := st.Pending(); ok && cur.Fork {
		if id := plan.StepID(cur.Step); id != "" {
			runs[id] = nil // the pending visit's, not the history's
			n := cur.Children
			if cur.Compensating {
				n = cur.Child + 1
			}
			for i := range min(n, maxRunLinks) {
				runs[id] = append(runs[id], durable.ChildID(st.SagaID, id, cur.Seq, i))
			}
		}
	}
	g := &grapher{plan: plan, statuses: statuses, runs: runs}
	return g.list(plan.Definition().Steps, true)
}

// maxRunLinks bounds the links to a fork's child runs (a foreach may have
// thousands).
const maxRunLinks = 50

type grapher struct {
	plan     *saga.Plan
	statuses map[string]StepStatus
	runs     map[string][]string
}

// list draws steps; own: they run in the saga itself (coloured).
func (g *grapher) list(steps []*lang.Step, own bool) []node {
	out := make([]node, 0, len(steps))
	for _, s := range steps {
		n := node{ID: s.ID, Kind: string(s.Kind), What: what(s)}
		if own {
			n.Status = g.statuses[s.ID]
			n.Runs = g.runs[s.ID]
		}
		if s.Compensate != nil {
			n.Undo = s.Compensate.Action
		}
		if s.Next != "" {
			n.Edges = append(n.Edges, "then "+s.Next)
		}
		for _, c := range s.Switch {
			if c.Default {
				n.Edges = append(n.Edges, "default → "+c.Next)
			} else {
				n.Edges = append(n.Edges, "if "+c.If+" → "+c.Next)
			}
		}
		for _, c := range s.Catch {
			n.Edges = append(n.Edges, "catch "+strings.Join(c.Errors, ", ")+" → "+c.Next)
		}
		switch s.Kind {
		case lang.KindParallel:
			for i, b := range s.Parallel {
				n.Groups = append(n.Groups, group{Label: fmt.Sprintf("branch %d", i+1), Steps: g.list(b.Steps, false)})
			}
		case lang.KindForeach:
			n.Groups = append(n.Groups, group{Label: "each item", Steps: g.list(s.Steps, false)})
		case lang.KindSaga:
			if child, ok := g.plan.Child(s.ID); ok {
				n.Groups = append(n.Groups, group{Label: "saga " + child.Name(), Steps: g.list(child.Definition().Steps, false)})
			}
		}
		out = append(out, n)
	}
	return out
}

// what says what a step does, in a few words.
func what(s *lang.Step) string {
	switch s.Kind {
	case lang.KindAction:
		if s.Callback != nil {
			return s.Action + ", then its callback"
		}
		return s.Action
	case lang.KindSet:
		names := make([]string, len(s.Set))
		for i, a := range s.Set {
			names[i] = a.Name
		}
		return "set " + strings.Join(names, ", ")
	case lang.KindAssert:
		if s.Assert != nil {
			return "assert " + s.Assert.If
		}
	case lang.KindFail:
		if s.Fail != nil {
			return "fail " + s.Fail.Error
		}
	case lang.KindWait:
		if s.Wait != nil {
			if s.Wait.Until != "" {
				return "wait until " + s.Wait.Until
			}
			return "wait " + lang.FormatDuration(s.Wait.For)
		}
	case lang.KindAwait:
		if s.Await != nil {
			return "await signal " + s.Await.Signal
		}
	case lang.KindForeach:
		if s.Foreach != nil {
			return fmt.Sprintf("foreach %s in %s, %d at once", s.Foreach.As, s.Foreach.Items, s.Foreach.Concurrency)
		}
	case lang.KindParallel:
		return fmt.Sprintf("parallel, %d branches", len(s.Parallel))
	case lang.KindSaga:
		return "saga " + s.Saga
	}
	return string(s.Kind)
}
