package saga

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// The compensation check (sagactl check) is the static, exhaustive
// counterpart of DryRun: where a dry run follows the one path an input
// takes and shows what one failure undoes, the check walks the compiled
// step graph of every list (the saga's own steps, each branch and foreach
// body) and of every child saga, and lists for each step that can fail
// every distinct compensation stack that can be standing when it does. It
// runs on a plan, so only on a definition validation accepted.

// Bounds of the check's walk.
const (
	// MaxCheckStates bounds the (step, compensation stack) pairs the check
	// walks in one list of steps (the saga's own, a branch, a foreach
	// body) of one definition file. A list with more paths than this
	// (a long row of switches, each choosing whether to run a compensable
	// action) gets its stacks listed as far as the walk went, and says so;
	// its findings do not depend on the walk and are complete.
	MaxCheckStates = 20000
	// MaxCheckStacks bounds the distinct stacks listed per failing step:
	// the longest first, the rest counted.
	MaxCheckStacks = 16
)

// FindingKind says what the compensation check found.
type FindingKind string

const (
	// FindingMissingCompensation: an action step declares neither
	// compensate nor compensate: none.
	FindingMissingCompensation FindingKind = "missing-compensation"
	// FindingMissingValue: a compensation reads a value that some path to
	// its running does not hold.
	FindingMissingValue FindingKind = "missing-value"
	// FindingOverwrittenValue: a compensation reads a var that a step
	// after its own may write, so it may run with a value its step never
	// saw.
	FindingOverwrittenValue FindingKind = "overwritten-value"
)

// FindingKinds lists every kind of finding, in documentation order.
func FindingKinds() []FindingKind {
	return []FindingKind{FindingMissingCompensation, FindingMissingValue, FindingOverwrittenValue}
}

// Finding is one thing the compensation check found, located as a
// validation problem is (file:line:column, step, field).
type Finding struct {
	Kind FindingKind
	lang.Problem
}

// CompensationCheck is what CheckCompensation found in a definition and
// its child sagas.
type CompensationCheck struct {
	// Files are the definition's file first, then each child saga's file
	// once, in the order the saga steps that run them come.
	Files []CheckedFile
}

// Findings lists the findings of every file, file by file.
func (c *CompensationCheck) Findings() []Finding {
	var out []Finding
	for _, f := range c.Files {
		out = append(out, f.Findings...)
	}
	return out
}

// CheckedFile is the compensation check of one definition file.
type CheckedFile struct {
	File string // as the plan was compiled with, or as its parent names it
	Saga string // its saga's name
	// RunBy names the saga steps that run it as a child ("FILE step ID");
	// nil for the definition checked.
	RunBy []string
	// Failures lists each step that can fail, in source order.
	Failures []FailurePoint
	// Findings are in source order.
	Findings []Finding
	// Truncated: the walk of some list stopped at MaxCheckStates; the
	// stacks listed there are those it found by then.
	Truncated bool
}

// FailurePoint is a step that can fail, and what compensation then undoes.
type FailurePoint struct {
	Step         string
	Kind         lang.StepKind
	Line, Column int
	// In names the step's list: empty for the saga's own steps, "branch 2
	// of book", "the body of tickets". A failure there compensates the
	// branch or iteration (Stacks), and then its fork (Fork) fails.
	In   string
	Fork string
	// Self is the step itself when it declares compensate: undone first
	// when it took effect before failing (an attempt whose outcome is
	// unknown, found out under its key; a callback whose action had
	// returned). Nil otherwise.
	Self *Undo
	// Stacks are the distinct compensation stacks a failure here can
	// meet, each newest first (the order compensation runs); an empty
	// stack undoes nothing. At most MaxCheckStacks, the longest first;
	// Omitted counts the rest.
	Stacks  [][]Undo
	Omitted int
}

// Undo is one entry of a compensation stack.
type Undo struct {
	Step string
	Kind lang.StepKind // action, or a fork: parallel, foreach, saga
	// Action is an action step's compensation; empty for a fork, whose
	// children are undone as a whole, the last first.
	Action string
	Child  string // a saga step's child saga file
	// Repeated: the step is in a loop, and each visit is undone, the
	// newest first.
	Repeated bool
	// IfTookEffect: the step failed and a catch routed its failure (a
	// Timeout, or a callback's): it is undone only if found out to have
	// taken effect.
	IfTookEffect bool
}

// CheckCompensation walks every path of the plan and of its child sagas:
// what each failure would undo, and what its compensations lack.
func (p *Plan) CheckCompensation() *CompensationCheck { return p.checkCompensation(MaxCheckStates) }

func (p *Plan) checkCompensation(maxStates int) *CompensationCheck {
	plans := []*Plan{p}
	runBy := map[*Plan][]string{}
	for i := 0; i < len(plans); i++ {
		q := plans[i]
		for _, ps := range q.steps {
			if ps.child == nil {
				continue
			}
			if _, seen := runBy[ps.child]; !seen && ps.child != p {
				plans = append(plans, ps.child)
			}
			runBy[ps.child] = append(runBy[ps.child], q.def.File+" step "+ps.ID)
		}
	}
	out := &CompensationCheck{}
	for _, q := range plans {
		cf := q.checkFile(maxStates)
		cf.RunBy = runBy[q]
		out.Files = append(out.Files, cf)
	}
	return out
}

// undoEntry is a compensation stack's entry while the check walks.
type undoEntry struct {
	step     int
	repeated bool
	maybe    bool
}

// checkEdge is a way on from a step: to its target (negative: its list's
// exit), pushing the step on the compensation stack or not.
type checkEdge struct {
	to          int
	push, maybe bool
}

// checkEdges lists the ways on from ps, success and catch, in source order.
func (p *Plan) checkEdges(ps *planStep) []checkEdge {
	var out []checkEdge
	switch ps.Kind {
	case lang.KindFail, lang.KindSucceed:
	case lang.KindSwitch:
		hasDefault := false
		for i, cs := range ps.cases {
			out = append(out, checkEdge{to: cs.nextIndex})
			hasDefault = hasDefault || ps.Switch[i].Default
		}
		if !hasDefault {
			out = append(out, checkEdge{to: ps.nextIndex})
		}
	default:
		out = append(out, checkEdge{to: ps.nextIndex, push: ps.comp != nil || (lang.IsFork(ps.Kind) && ps.undoable)})
	}
	for i, r := range ps.routes {
		// A caught failure leaves a compensable step on the stack when it
		// may have taken effect: an attempt timed out and no answer said
		// otherwise since (found out if the saga compensates), or its
		// callback failed after its action returned. Only a type the
		// step's retry lists as permanent is a definite answer whatever
		// the error (definite, the engine's own rule): a Timeout never is.
		maybe := ps.comp != nil && (ps.Callback != nil || slices.ContainsFunc(ps.Catch[i].Errors, func(t string) bool {
			return !definite(ps.policy, nil, t)
		}))
		out = append(out, checkEdge{to: r.nextIndex, push: maybe, maybe: maybe})
	}
	return out
}

// canFail reports whether the step can fail at run time: anything that
// calls, waits, forks, asserts or fails (a wait: the saga's deadline or a
// cancel meets it there, since a saga mostly waits in one), and any step
// that evaluates an expression (which may fail: a missing key, an
// overflow).
func (ps *planStep) canFail() bool {
	switch ps.Kind {
	case lang.KindSet:
		return slices.ContainsFunc(ps.assigns, func(a compiledAssign) bool { return a.val != nil && a.val.kind != lang.ValueLiteral })
	case lang.KindSwitch:
		return slices.ContainsFunc(ps.cases, func(c compiledCase) bool { return c.cond != nil })
	case lang.KindSucceed:
		return ps.output != nil && ps.output.kind != lang.ValueLiteral
	}
	return true
}

// push returns stack with step on top; a step already on it (a loop) is
// marked repeated where it stands, so that stacks stay finite.
func push(stack []undoEntry, step int, maybe bool) []undoEntry {
	out := slices.Clone(stack)
	for k := range out {
		if out[k].step == step {
			out[k].repeated = true
			out[k].maybe = out[k].maybe && maybe
			return out
		}
	}
	return append(out, undoEntry{step: step, maybe: maybe})
}

func stackKey(stack []undoEntry) string {
	var b strings.Builder
	for _, e := range stack {
		b.WriteString(strconv.Itoa(e.step))
		if e.repeated {
			b.WriteByte('*')
		}
		if e.maybe {
			b.WriteByte('?')
		}
		b.WriteByte(',')
	}
	return b.String()
}

// checkFile checks one plan, its child sagas aside.
func (p *Plan) checkFile(maxStates int) CheckedFile {
	cf := CheckedFile{File: p.def.File, Saga: p.def.Name}
	stacks := make([][][]undoEntry, len(p.steps))
	type state struct {
		step  int
		stack []undoEntry
	}
	for _, l := range p.lists {
		if l.n == 0 {
			continue
		}
		states := 0
		seen := map[string]bool{}
		met := make([]map[string]bool, len(p.steps))
		work := []state{{step: l.first}}
		for len(work) > 0 {
			st := work[len(work)-1]
			work = work[:len(work)-1]
			sk := stackKey(st.stack)
			key := strconv.Itoa(st.step) + "|" + sk
			if seen[key] {
				continue
			}
			if states >= maxStates {
				cf.Truncated = true
				break
			}
			seen[key] = true
			states++
			ps := p.steps[st.step]
			if ps.canFail() {
				if met[st.step] == nil {
					met[st.step] = map[string]bool{}
				}
				if !met[st.step][sk] {
					met[st.step][sk] = true
					stacks[st.step] = append(stacks[st.step], st.stack)
				}
			}
			edges := p.checkEdges(ps)
			for k := len(edges) - 1; k >= 0; k-- { // the first edge walked first
				e := edges[k]
				if e.to < 0 {
					continue
				}
				next := st.stack
				if e.push {
					next = push(next, ps.idx, e.maybe)
				}
				work = append(work, state{step: e.to, stack: next})
			}
		}
	}
	for i, ps := range p.steps {
		if !ps.canFail() || len(stacks[i]) == 0 {
			continue
		}
		fp := FailurePoint{Step: ps.ID, Kind: ps.Kind, Line: ps.Pos.Line, Column: ps.Pos.Column}
		if ps.comp != nil {
			fp.Self = &p.undos([]undoEntry{{step: i, maybe: true}})[0]
		}
		if l := p.lists[ps.list]; l.fork >= 0 {
			fp.In, fp.Fork = p.listName(ps.list), p.steps[l.fork].ID
		}
		for _, s := range stacks[i] {
			fp.Stacks = append(fp.Stacks, p.undos(s))
		}
		slices.SortStableFunc(fp.Stacks, func(a, b []Undo) int { return cmp.Compare(len(b), len(a)) })
		if len(fp.Stacks) > MaxCheckStacks {
			fp.Omitted = len(fp.Stacks) - MaxCheckStacks
			fp.Stacks = fp.Stacks[:MaxCheckStacks]
		}
		cf.Failures = append(cf.Failures, fp)
	}
	slices.SortStableFunc(cf.Failures, func(a, b FailurePoint) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	cf.Findings = p.compensationFindings()
	return cf
}

// undos turns a walk's stack into the order compensation runs: newest first.
func (p *Plan) undos(stack []undoEntry) []Undo {
	out := make([]Undo, 0, len(stack))
	for k := len(stack) - 1; k >= 0; k-- {
		e := stack[k]
		ps := p.steps[e.step]
		u := Undo{Step: ps.ID, Kind: ps.Kind, Repeated: e.repeated, IfTookEffect: e.maybe}
		if ps.comp != nil {
			u.Action = ps.comp.action
		}
		if ps.child != nil {
			u.Child = ps.child.def.File
		}
		out = append(out, u)
	}
	return out
}

// compensationFindings lists what the check finds in the plan's own steps,
// in source order.
func (p *Plan) compensationFindings() []Finding {
	var out []Finding
	add := func(kind FindingKind, s *lang.Step, pos lang.Pos, field, format string, args ...any) {
		out = append(out, Finding{Kind: kind, Problem: lang.Problem{File: p.def.File, Line: pos.Line, Column: pos.Column, Step: s.ID, Field: field, Message: fmt.Sprintf(format, args...)}})
	}
	for _, ps := range p.steps {
		s := ps.Step
		if s.Kind == lang.KindAction && s.Compensate == nil && !s.NoCompensation {
			add(FindingMissingCompensation, s, s.FieldPos("action"), "compensate",
				"action %s has no compensate: if a later step fails, or the saga is cancelled or runs past its timeout, what it did stays done; give compensate: {action: ...} to undo it, or compensate: none when it changes nothing that needs undoing", s.Action)
		}
		if ps.comp == nil || ps.comp.with == nil {
			continue
		}
		pos := s.Compensate.With.Pos
		reads, whole := ps.comp.with.varReads()
		if s.Out != "" && slices.Contains(reads, s.Out) && s.Callback != nil && lang.IsLambdaAction(s.Action) {
			add(FindingMissingValue, s, pos, "compensate.with",
				"reads vars.%s, its own out: a lambda: action with callback returns nothing, so vars.%s is null until its token is completed, and a callback that fails or times out is compensated with null; build the undo from what its with read (input, vars written before it)", s.Out, s.Out)
		}
		writers := p.writersAfter(ps)
		delete(writers, s.Out) // its own output is kept with its completion
		if whole {
			var all []string
			for _, name := range slices.Sorted(maps.Keys(writers)) {
				for _, w := range writers[name] {
					if !slices.Contains(all, w) {
						all = append(all, w)
					}
				}
			}
			if len(all) > 0 {
				slices.SortStableFunc(all, func(a, b string) int { return cmp.Compare(p.index[a], p.index[b]) })
				add(FindingOverwrittenValue, s, pos, "compensate.with",
					"reads vars whole, or by a key known only when it runs, and %s may write vars after this step: the compensation runs with the vars at the time of the failure, not those this step ran with; read the fields it needs by name", p.stepNames(all))
			}
		}
		for _, name := range reads {
			if ws := writers[name]; len(ws) > 0 {
				add(FindingOverwrittenValue, s, pos, "compensate.with",
					"reads vars.%s, which %s may write after this step: the compensation runs with the value at the time of the failure, not the one this step ran with; keep what the undo needs in this step's out, or in a var no later step writes", name, p.stepNames(ws))
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Message, b.Message))
	})
	return out
}

// writersAfter lists, for each var, the ids of the steps that may write
// it while ps is on the compensation stack, in plan order: those reachable
// in its list from the ways on that leave it there.
func (p *Plan) writersAfter(ps *planStep) map[string][]string {
	reached := map[int]bool{}
	var work []int
	for _, e := range p.checkEdges(ps) {
		if e.push && e.to >= 0 && !reached[e.to] {
			reached[e.to] = true
			work = append(work, e.to)
		}
	}
	for len(work) > 0 {
		i := work[len(work)-1]
		work = work[:len(work)-1]
		for _, e := range p.checkEdges(p.steps[i]) {
			if e.to >= 0 && !reached[e.to] {
				reached[e.to] = true
				work = append(work, e.to)
			}
		}
	}
	by := map[string][]string{}
	for _, i := range slices.Sorted(maps.Keys(reached)) {
		w := p.steps[i]
		if w.Out != "" && w != ps {
			by[w.Out] = append(by[w.Out], w.ID)
		}
		for _, a := range w.Set {
			if !slices.Contains(by[a.Name], w.ID) {
				by[a.Name] = append(by[a.Name], w.ID)
			}
		}
	}
	return by
}

// stepNames names steps for a message: "step b (line 9)", "steps b (line
// 9) and c (line 12)".
func (p *Plan) stepNames(ids []string) string {
	names := make([]string, len(ids))
	for k, id := range ids {
		names[k] = fmt.Sprintf("%s (line %d)", id, p.steps[p.index[id]].Pos.Line)
	}
	if len(names) == 1 {
		return "step " + names[0]
	}
	return "steps " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// varReads lists the vars t's expressions read by name (has() aside),
// each once, sorted, and whether one reads vars whole or by a key known
// only when it runs.
func (t *template) varReads() (names []string, whole bool) {
	add := func(p *program) {
		if p != nil {
			names = append(names, p.reads...)
			whole = whole || p.uses.allVars
		}
	}
	var walk func(t *template)
	walk = func(t *template) {
		add(t.prog)
		for _, pt := range t.parts {
			add(pt.prog)
		}
		for _, it := range t.items {
			walk(it)
		}
	}
	walk(t)
	slices.Sort(names)
	return slices.Compact(names), whole
}
