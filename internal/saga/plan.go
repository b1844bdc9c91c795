package saga

import (
	"time"

	"github.com/google/cel-go/cel"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// end is the step index past the last step: reaching it succeeds.
const end = -1

// branchEnd is the nextIndex after the last step of a branch or of a
// foreach body: the branch (or iteration) ends there, and its child run
// succeeds. It is not end, which ends the saga. A next, catch or switch
// target that would cross a list's boundary is refused, and leads to its
// list's exit (end or branchEnd) while the rest is checked.
const branchEnd = -2

// Plan is a compiled definition: immutable, safe for concurrent use, and
// identified by the content hash of its source.
type Plan struct {
	def   *lang.Definition
	hash  string
	opts  Options
	steps []*planStep
	index map[string]int
	// lists are the step lists: the saga's own steps first (lists[0],
	// steps 0 to len(def.Steps)-1, so a definition without forks has the
	// indexes it always had), then each branch and foreach body, each
	// after the list holding its fork step. Every step of every list is in
	// steps, so a cursor's index names any step.
	lists []stepList
	// callbacks: some step has callback (its sagas need a secret).
	callbacks bool
	// forks: some step is a parallel, foreach or saga step.
	forks bool
	// secrets: some input field is secret (Redactor).
	secrets bool
}

// stepList is one list of steps: the saga's own, a branch of a parallel
// step, or a foreach step's body. Its steps are steps[first:first+n], in
// source order; a step's next stays in its list.
type stepList struct {
	fork   int // the parallel or foreach step whose branch or body this is; -1 for the saga's own steps
	branch int // parallel: which branch (0 is the first); 0 otherwise
	first  int // the index of its first step
	n      int // how many steps it has
	depth  int // how many forks hold it: 0 for the saga's own steps
	// scope lists the foreach item names its expressions see, outermost
	// first: the as of every foreach whose body holds this list. index is
	// the innermost's. Empty outside any foreach body.
	scope []string
	env   *cel.Env // declares input, vars, saga, and the scope's names and index
}

// exit is where a list's last step goes on: end for the saga's own
// steps, branchEnd for a branch or a body.
func (l *stepList) exit() int {
	if l.fork < 0 {
		return end
	}
	return branchEnd
}

// planStep is a step compiled: its definition (embedded, so s.ID and
// s.Timeout read through) and what compiling it produced, under names of
// their own (args is the compiled With, policy the Retry in effect).
// Step ids stay ids; every field that holds a position in Plan.steps is
// an index.
type planStep struct {
	*lang.Step
	idx       int
	list      int              // the index in Plan.lists of the list holding this step
	nextIndex int              // the step after this one when it completes: the index of Next, or the following one; after the last, end (the saga's own steps) or branchEnd (a branch or a body)
	args      *template        // action: its with
	assigns   []compiledAssign // set
	cases     []compiledCase   // switch
	check     *program         // assert: its if
	output    *template        // succeed: its output
	until     *program         // wait: its until, a timestamp
	routes    []compiledCatch  // catch
	policy    lang.RetryPolicy // action: its retry, or the default
	comp      *compiledComp    // compensate
	inLoop    bool
	// Forks (parallel, foreach, saga): how the runtime starts the child
	// runs; the step's out receives the list of their outputs (saga: the
	// child's output), and its catch routes the fork's failure once the
	// children it ran are undone.
	branches    []int    // parallel: the index of each branch's first step, in branch order
	body        int      // foreach: the index of the body's first step
	items       *program // foreach: the list to iterate (at most lang.MaxForeachItems, checked when it runs)
	as          string   // foreach: the item's name in the body (index is its position)
	concurrency int      // foreach: the iterations in flight at most
	child       *Plan    // saga: the child definition, compiled; its input is args (the step's with)
	// undoable: a child run of this fork may complete a step that
	// declares compensate, so a fork that succeeded goes on the
	// compensation stack, and one that failed undoes its children.
	undoable bool
	// copies is what a parallel's or foreach's children read of the
	// parent's input and vars (nil: nothing): only that is copied into
	// each child, so that a child is no larger than what it reads.
	copies *uses
	// keepOut: the step's output is kept with its completion, for its
	// compensation to read, because its var may be overwritten before the
	// compensation runs: the step is in a loop, or another step (an
	// action's out, a set) writes the same var.
	keepOut bool
}

type compiledAssign struct {
	name string
	val  *template
}

type compiledCase struct {
	cond      *program // nil for default
	nextIndex int      // the index of the case's Next
}

type compiledCatch struct {
	errors    []string
	nextIndex int // the index of the catch's Next
}

type compiledComp struct {
	action  string
	with    *template
	retry   lang.RetryPolicy
	timeout time.Duration
}

// Hash is the definition's content hash: the hex SHA-256 of its bundle
// (Source), which is its source when it has no child sagas.
func (p *Plan) Hash() string { return p.hash }

// Source is what the hash covers and what a store keeps: the definition's
// source, or, when it has child sagas, the bundle of its source and theirs
// (docs/PROTOCOL.md, "Bundles"). Compile reads either back. It is
// Definition().Source.
func (p *Plan) Source() []byte { return p.def.Source }

// Child returns the compiled child of the saga step with the given id.
func (p *Plan) Child(id string) (*Plan, bool) {
	i, ok := p.index[id]
	if !ok || p.steps[i].child == nil {
		return nil, false
	}
	return p.steps[i].child, true
}

// Name is the saga's name.
func (p *Plan) Name() string { return p.def.Name }

// Definition is the parsed definition the plan was compiled from. Treat it as read-only.
func (p *Plan) Definition() *lang.Definition { return p.def }

// Step returns the step with the given id.
func (p *Plan) Step(id string) (*lang.Step, bool) {
	i, ok := p.index[id]
	if !ok {
		return nil, false
	}
	return p.steps[i].Step, true
}
