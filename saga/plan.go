package saga

import (
	"time"

	"github.com/lambdasaga/lambdasaga/lang"
)

// end is the step index past the last step: reaching it succeeds.
const end = -1

// Plan is a compiled definition: immutable, safe for concurrent use, and
// identified by the content hash of its source.
type Plan struct {
	def   *lang.Definition
	hash  string
	opts  Options
	steps []*planStep
	index map[string]int
	// callbacks: some step has callback (its sagas need a secret).
	callbacks bool
}

// planStep is a step compiled: its definition (embedded, so s.ID and
// s.Timeout read through) and what compiling it produced, under names of
// their own (args is the compiled With, policy the Retry in effect).
// Step ids stay ids; every field that holds a position in Plan.steps is
// an index.
type planStep struct {
	*lang.Step
	idx       int
	nextIndex int              // the step after this one when it completes: the index of Next, or the following one; end after the last
	args      *template        // action: its with
	assigns   []compiledAssign // set
	cases     []compiledCase   // switch
	check     *program         // assert: its if
	output    *template        // succeed: its output
	until     *program         // wait: its until, a timestamp
	routes    []compiledCatch  // catch
	policy    lang.RetryPolicy // action: its retry, or the default
	comp      *compiledComp    // compensate
	fork      *forkSpec        // parallel, foreach, saga
	inLoop    bool
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

// Hash is the definition's content hash (hex SHA-256 of its source).
func (p *Plan) Hash() string { return p.hash }

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
