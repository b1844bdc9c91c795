package saga

import (
	"fmt"
	"slices"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/traits"
	"maps"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// ChildStart is how child Index of a fork starts: what Plan.Child returns
// and EventStart takes in Event.Child.
type ChildStart struct {
	Link  ParentLink     // where it comes from
	Input map[string]any // a branch's, the parent's input; a child saga's, its with
	Vars  map[string]any // a branch's: the parent's vars at the fork (a copy); nil for a child saga
	// Scope is what a foreach body's expressions see beside input and
	// vars: each enclosing foreach's item under its as name, and index,
	// the innermost one's position; nil outside any foreach body.
	Scope    map[string]any
	First    int       // the index of the step it starts at, in the plan it runs
	Deadline time.Time // the parent's deadline, or the child saga's own if earlier; zero: none
	// Stopped starts the child already cancelled: a child its fork's
	// failure stopped before it was created. Nothing of it runs.
	Stopped bool
	// Secrets are the texts of the parent's secrets that a child saga's
	// input holds (State.Inherited): a secret the parent copied into a var
	// or gave as a foreach item, given on to a field the child saga does
	// not declare secret, stays masked in the child. A branch or
	// iteration takes its parent's inherited ones.
	Secrets []string
	// Kept are signals the parent kept that only this child's run may
	// take (Plan.HandedTo): the child starts keeping them.
	Kept []Delivery
}

// Join is what EventJoin brings: how a fork's children ended.
type Join struct {
	Version uint64 // the version the fork transition wrote (Cursor.Version)
	// Outputs are the children's outputs, by index, when every child
	// succeeded.
	Outputs []any
	// Failure is the failure of the first child counted as failed; nil
	// when none failed.
	Failure *StepError
	// Succeeded lists the children that succeeded, by index, ascending:
	// when the fork failed, they are undone.
	Succeeded []int
	// Parked lists the children parked in compensation_failed, by index,
	// ascending: when the fork's undo reaches one, the saga parks too.
	Parked []int
	// Seen are the delivery ids the children took: the saga remembers
	// them, so that a sender's retry of a signal a child took is a
	// duplicate, not a second signal for the saga's own later await.
	Seen []string
}

// Undone is what EventUndone brings: a child the saga undoes ended.
type Undone struct {
	Child int // the child's index
	// Parked is the child's compensation error when it parked
	// (compensation_failed) instead of ending compensated.
	Parked *StepError
}

// isFork reports whether the step with index idx forks.
func (p *Plan) isFork(idx int) bool {
	return idx >= 0 && idx < len(p.steps) && lang.IsFork(p.steps[idx].Kind)
}

// Launch returns the plan child k of the fork parent waits on runs, and
// its start. The caller makes the child's id with durable.ChildID and
// advances a new state with EventStart and Event.Child.
func (p *Plan) Launch(parent *State, k int) (*Plan, *ChildStart, error) {
	cur, ok := parent.Pending()
	if !ok || !cur.Fork || cur.Compensating || !p.isFork(cur.Step) {
		return nil, nil, fmt.Errorf("%w: saga %s waits on no fork", ErrInvalidEvent, parent.SagaID)
	}
	if k < 0 || k >= cur.Children {
		return nil, nil, fmt.Errorf("%w: saga %s's fork has no child %d", ErrInvalidEvent, parent.SagaID, k)
	}
	s := p.steps[cur.Step]
	cs := &ChildStart{
		Link:     ParentLink{ID: parent.SagaID, Step: s.ID, Seq: cur.Seq, Version: cur.Version, Index: k, Children: cur.Children, Lanes: cur.Lanes},
		Deadline: parent.Deadline,
		Kept:     p.HandedTo(parent, k),
	}
	switch s.Kind {
	case lang.KindSaga:
		in, _ := parent.ForkItems[0].(map[string]any)
		cs.Input, cs.Link.Saga = in, true
		cs.Secrets = inheritedSecrets(p.Redactor(parent).within(in), s.child.RedactorFor(in))
		if t := s.child.def.Timeout; t > 0 {
			if own := parent.UpdatedAt.Add(t); cs.Deadline.IsZero() || own.Before(cs.Deadline) {
				cs.Deadline = own
			}
		}
		return s.child, cs, nil
	case lang.KindForeach:
		cs.Input, cs.Vars = s.copies.pick(parent.Input, parent.Vars)
		p.copySecrets(cs.Input, parent.Input)
		cs.Secrets = slices.Clone(parent.Inherited)
		cs.First = s.body
		cs.Scope = maps.Clone(parent.Scope)
		if cs.Scope == nil {
			cs.Scope = map[string]any{}
		}
		item, err := p.item(s, parent, k)
		if err != nil {
			return nil, nil, err
		}
		cs.Scope[s.as], cs.Scope["index"] = item, int64(k)
	default:
		cs.Input, cs.Vars = s.copies.pick(parent.Input, parent.Vars)
		p.copySecrets(cs.Input, parent.Input)
		cs.Secrets = slices.Clone(parent.Inherited)
		cs.First, cs.Scope = s.branches[k], maps.Clone(parent.Scope)
	}
	return p, cs, nil
}

// fork starts a fork step's visit: the saga waits for its children to
// end. A foreach over an empty list completes at once. It reports the
// next index to run, and false when the step failed or the saga waits.
func (r *runner) fork(s *planStep, idx int) (int, bool) {
	st, p := r.st, r.p
	var items []any
	n := len(s.branches)
	switch s.Kind {
	case lang.KindForeach:
		v, err := s.items.eval(r.activation(st.Vars, 1))
		if err != nil {
			return r.caught(s, 1, exprError(s.ID, err))
		}
		native, err := toNative(v, r.valueLimit())
		if err != nil {
			return r.caught(s, 1, newStepError(s.ID, lang.ErrorTypeExpression, fmt.Sprintf("foreach of step %s: %v", s.ID, err)))
		}
		list, ok := native.([]any)
		if !ok {
			return r.caught(s, 1, newStepError(s.ID, lang.ErrorTypeExpression, fmt.Sprintf("foreach of step %s is %s, not a list", s.ID, describe(native))))
		}
		if len(list) > durable.MaxForkChildren {
			return r.caught(s, 1, newStepError(s.ID, lang.ErrorTypeExpression, fmt.Sprintf("foreach of step %s has %d elements, over the limit of %d", s.ID, len(list), durable.MaxForkChildren)))
		}
		checked, err := CheckValue(list)
		if err != nil {
			return r.caught(s, 1, newStepError(s.ID, lang.ErrorTypeExpression, "foreach list: "+err.Error()))
		}
		items, n = checked.([]any), len(list)
	case lang.KindSaga:
		var in map[string]any
		if s.args != nil {
			v, err := s.args.eval(r.activation(st.Vars, 1))
			if err != nil {
				return r.caught(s, 1, exprError(s.ID, err))
			}
			m, ok := v.(map[string]any)
			if !ok {
				return r.caught(s, 1, newStepError(s.ID, lang.ErrorTypeExpression, fmt.Sprintf("the input of child saga %s is not a map", s.child.def.Name)))
			}
			in = m
		}
		checked, err := s.child.CheckInput(in)
		if err != nil {
			return r.caught(s, 1, newStepError(s.ID, lang.ErrorTypeExpression, fmt.Sprintf("the input of child saga %s: %v", s.child.def.Name, err)))
		}
		items, n = []any{checked}, 1
	}
	if n == 0 {
		if !r.takeOut(s, []any{}) {
			return 0, false
		}
		r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompleted, Attempt: 1})
		return s.nextIndex, true
	}
	if st.Seq >= uint64(p.opts.MaxVisits) {
		return r.caught(s, 1, &StepError{Step: s.ID, Type: lang.ErrorTypeVisitLimit, Message: fmt.Sprintf("the saga made %d visits of actions, waits and forks, its limit", st.Seq)})
	}
	lanes := n
	if s.Kind == lang.KindForeach && s.concurrency < lanes {
		lanes = s.concurrency
	}
	st.Seq++
	st.Forks = append(st.Forks, ForkVisit{Step: idx, Seq: st.Seq, Children: n, Lanes: lanes})
	if s.Kind == lang.KindSaga || s.Kind == lang.KindForeach && !s.items.stable {
		st.ForkItems = items // a stable list is read again from the saga when a child starts
	}
	st.Cursors = append(st.Cursors[:0], Cursor{Step: idx, Attempt: 1, Seq: st.Seq, Fork: true, Children: n, Lanes: lanes, Version: st.Version})
	st.Status = durable.StatusWaiting
	for k := range lanes {
		r.st.Outbox = append(r.st.Outbox, durable.Message{SagaID: st.SagaID, Version: st.Version, Queue: durable.QueueAdvance, Kind: durable.KindLaunch, Step: s.ID, Attempt: 1, Child: k})
	}
	if !r.fits() {
		st.Forks = st.Forks[:len(st.Forks)-1]
		st.ForkItems, st.Outbox = nil, st.Outbox[:0]
		st.Cursors = st.Cursors[:0]
		st.Status = durable.StatusRunning
		return r.caught(s, 1, r.tooLarge(s.ID, "the list of foreach "+s.ID))
	}
	if wake := st.WakeAt(); !wake.IsZero() && wake.Sub(r.ev.Now) <= durable.MaxDelay {
		// The saga's deadline comes within what a queue's delay covers:
		// the message is its timer (later ones are the tick's), as a
		// pause's.
		r.send(durable.QueueAdvance, s.ID, 1, wake.Sub(r.ev.Now))
	}
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeWaiting, Attempt: 1})
	return 0, false
}

// startChild begins a child run at its first step.
func (r *runner) startChild(cs *ChildStart) {
	st := r.st
	link := cs.Link
	st.Parent = &link
	st.Input = cs.Input
	if cs.Vars != nil {
		st.Vars = cs.Vars
	}
	st.Scope = cs.Scope
	st.Deadline = cs.Deadline
	st.Inherited = cs.Secrets
	for _, d := range cs.Kept {
		st.Kept = append(st.Kept, d)
		remember(st, d.ID)
	}
	if cs.Stopped {
		st.Failure = &StepError{Type: lang.ErrorTypeCancelled, Message: "its fork failed before it started"}
		st.Status = durable.StatusCompensated
		return
	}
	r.run(cs.First)
}

// branchEnded ends a branch or iteration: the child run succeeds with the
// value of the last out it wrote.
func (r *runner) branchEnded() {
	st := r.st
	var out any
	if st.LastOut != "" {
		out = st.Vars[st.LastOut]
	}
	r.succeed(out)
}

// wroteOut notes, in a child run, the var an out just wrote: the run's
// output if its branch ends next.
func (r *runner) wroteOut(name string) {
	if r.st.Parent != nil && name != "" {
		r.st.LastOut = name
	}
}

// joined ends the fork the saga waits on: with every child succeeded,
// its out is their outputs and the saga goes on; otherwise the children
// that succeeded are undone, newest first, and then the fork's failure is
// caught or the saga compensates.
func (r *runner) joined(j *Join) {
	st := r.st
	cur := st.Cursors[0]
	s := r.p.steps[cur.Step]
	r.dropHanded(cur)
	for _, id := range j.Seen {
		if !containsString(st.Seen, id) {
			remember(st, id)
		}
	}
	st.Joined = cur.Version
	st.Cursors = st.Cursors[:0]
	st.ForkItems = nil
	st.Status = durable.StatusRunning
	failure := j.Failure
	switch {
	case st.CancelRequested:
		failure = cancelled()
		failure.Step = s.ID // the saga's own: no catch takes it (stoppedFromOutside)
	case st.Failure != nil: // the deadline passed while the saga waited
		failure = st.Failure
	}
	if failure == nil && s.Out != "" {
		old, had := st.Vars[s.Out]
		var out any = j.Outputs
		if s.Kind == lang.KindSaga {
			out = j.Outputs[0] // a child saga's output is the step's
		}
		st.Vars[s.Out] = out
		if !r.fits() {
			r.restore([]savedVar{{s.Out, old, had}})
			failure = r.tooLarge(s.ID, "the outputs of "+s.ID+"'s children")
			st.Failure = failure
		} else {
			r.wroteOut(s.Out)
		}
	}
	if failure == nil {
		if s.undoable {
			st.Stack = append(st.Stack, Completion{Step: cur.Step, Seq: cur.Seq, Children: cur.Children})
		}
		r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompleted, Attempt: 1})
		r.run(s.nextIndex)
		return
	}
	st.Failure = newStepError(failure.Step, failure.Type, failure.Message)
	st.CancelRequested = false
	undo := slices.Sorted(slices.Values(append(slices.Clone(j.Succeeded), j.Parked...)))
	r.undoFailedFork(s, cur, undo)
}

// dropHanded drops the kept signals the fork cur handed to its children
// (Plan.HandedTo) as it joins: given once, never again to a later visit.
func (r *runner) dropHanded(cur Cursor) {
	st := r.st
	if len(st.Kept) == 0 {
		return
	}
	handed := r.p.handedOut(st, cur)
	st.Kept = slices.DeleteFunc(st.Kept, func(d Delivery) bool {
		_, ok := handed[d.ID]
		return ok
	})
}

// undoFailedFork undoes the children of a failed fork that succeeded,
// the highest index first; with none to undo, the fork's failure (in
// st.Failure) is handled at once.
func (r *runner) undoFailedFork(s *planStep, cur Cursor, succeeded []int) {
	st := r.st
	if !s.undoable || len(succeeded) == 0 {
		r.forkFailed(s)
		return
	}
	st.Status = durable.StatusCompensating
	if r.routed(s, st.Failure) {
		st.Status = durable.StatusRunning // a catch takes the failure once the children are undone
	}
	last := len(succeeded) - 1
	st.UndoNext = st.UndoNext[:0]
	for i := last - 1; i >= 0; i-- {
		st.UndoNext = append(st.UndoNext, succeeded[i])
	}
	if len(st.UndoNext) == 0 {
		st.UndoNext = nil
	}
	r.undoChild(s, Cursor{Step: cur.Step, Attempt: 2, Seq: cur.Seq, Fork: true, Children: cur.Children, Lanes: cur.Lanes, Version: cur.Version, Child: succeeded[last]})
}

// routed reports whether a catch of fork step s takes err once the fork's
// children are undone (a cancel and the deadline go past every catch: a
// saga past its deadline compensates, whatever failed).
func (r *runner) routed(s *planStep, err *StepError) bool {
	if err == nil || r.st.CancelRequested || r.pastDeadline() || stoppedFromOutside(s, err) || lang.Uncatchable(err.Type) {
		return false
	}
	for _, c := range s.routes {
		if slices.Contains(c.errors, err.Type) || slices.Contains(c.errors, "*") {
			return true
		}
	}
	return false
}

// stoppedFromOutside reports whether err, the failure of fork step s, is
// the saga's own cancel or deadline (the join names the fork step in
// them) rather than a child's failure of the same type: an action's error
// type Cancelled, a child saga's own timeout, an operator's cancel of one
// child. A catch takes those like any failure of the step.
func stoppedFromOutside(s *planStep, err *StepError) bool {
	return (err.Type == lang.ErrorTypeCancelled || err.Type == lang.ErrorTypeDeadline) && err.Step == s.ID
}

// forkFailed handles the failure of a fork whose children are all
// undone: a catch routes it, or the saga compensates.
func (r *runner) forkFailed(s *planStep) {
	st := r.st
	err := st.Failure
	st.Failure = nil
	st.Status = durable.StatusRunning
	if !st.CancelRequested && (stoppedFromOutside(s, err) || r.pastDeadline()) {
		// The saga's own cancel or deadline: no catch takes them (a
		// cancel that came during the undo compensates in stepFailed).
		r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeFailed, Attempt: 1, Error: err})
		r.compensate(err)
		return
	}
	r.stepFailed(s, 1, err)
}

// stopFork fails, from outside, the fork the saga waits on (a cancel,
// its deadline): a message of the saga's, whose handler records it in
// the fork's record and cancels the fork's running children; the join
// follows when they have ended.
func (r *runner) stopFork(cur Cursor) {
	st := r.st
	s := r.p.steps[cur.Step]
	st.Outbox = append(st.Outbox, durable.Message{SagaID: st.SagaID, Version: st.Version, Queue: durable.QueueAdvance, Kind: durable.KindStop, Step: s.ID, Attempt: 1})
}

// undoChild makes the saga wait for child cur.Child of a fork to be
// undone. Attempt 2 marks the undo of a fork that failed (its failure is
// handled after), 1 the compensation of a fork that succeeded.
func (r *runner) undoChild(s *planStep, cur Cursor) {
	st := r.st
	cur.Compensating = true
	st.Cursors = append(st.Cursors[:0], cur)
	if cur.Attempt == 1 {
		st.Status = durable.StatusCompensating
	}
	st.Outbox = append(st.Outbox, durable.Message{SagaID: durable.ChildID(st.SagaID, s.ID, cur.Seq, cur.Child), Version: st.Version, Queue: durable.QueueCompensate, Kind: durable.KindUndo, Step: s.ID, Attempt: 1})
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeStarted, Attempt: 1, Compensation: true})
}

// childUndone goes on after a child was undone: to the next child, or,
// when none is left, to what follows the fork's undo.
func (r *runner) childUndone(u *Undone) {
	st := r.st
	cur := st.Cursors[0]
	s := r.p.steps[cur.Step]
	st.Undid = u.Child + 1
	if u.Parked != nil {
		// The saga parks on the child: its cursor stays, so that a resume
		// undoes the child again (once an operator resumed it), and a skip
		// goes on to the next.
		st.Status = durable.StatusCompensationFailed
		// Resuming this saga resumes the child; skipping here skips the
		// child's whole undo, so the message names the child's run, where
		// a skip skips only the step it parked on.
		st.CompensationError = newStepError(s.ID, u.Parked.Type, fmt.Sprintf("child %d (run %s) parked (resume here resumes it; resume --skip here skips the whole child's undo, resume --skip on the run only its step): %s",
			u.Child, durable.ChildID(st.SagaID, s.ID, cur.Seq, u.Child), u.Parked.Message))
		r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompensationFailed, Attempt: 1, Compensation: true, Error: st.CompensationError})
		return
	}
	if st.Status == durable.StatusCompensationFailed {
		// It parked on this child, which an operator resumed: go on.
		st.CompensationError = nil
		st.Status = durable.StatusCompensating
		if cur.Attempt == 2 && r.routed(s, st.Failure) {
			st.Status = durable.StatusRunning
		}
	}
	if cur.Attempt == 2 && st.Status == durable.StatusRunning && !r.routed(s, st.Failure) {
		// Its deadline passed while it undid the children: no catch
		// takes the failure now, and the saga compensates.
		st.Status = durable.StatusCompensating
	}
	switch {
	case cur.Attempt == 2 && len(st.UndoNext) > 0:
		cur.Child, st.UndoNext = st.UndoNext[0], st.UndoNext[1:]
		if len(st.UndoNext) == 0 {
			st.UndoNext = nil
		}
		r.undoChild(s, cur)
	case cur.Attempt == 2:
		st.Cursors = st.Cursors[:0]
		r.forkFailed(s)
	case cur.Child > 0:
		cur.Child--
		r.undoChild(s, cur)
	default:
		st.Stack = st.Stack[:len(st.Stack)-1]
		r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompensated, Attempt: 1, Compensation: true})
		r.nextCompensation()
	}
}

// ChildrenFork reports whether a child run of fork step idx may fork in
// turn: a fork in its branches or body, at any depth, or any fork of its
// child saga. A child that cannot is no tree of its own, and the walk
// that expires a finished tree need not read it (durable.KindExpire).
func (p *Plan) ChildrenFork(idx int) bool {
	if !p.isFork(idx) {
		return false
	}
	if c := p.steps[idx].child; c != nil {
		return c.forks
	}
	for _, ps := range p.steps {
		if !lang.IsFork(ps.Kind) {
			continue
		}
		for l := p.lists[ps.list]; l.fork >= 0; l = p.lists[p.steps[l.fork].list] {
			if l.fork == idx {
				return true
			}
		}
	}
	return false
}

// StepID returns the id of the step with index idx, or "" when there is none.
func (p *Plan) StepID(idx int) string {
	if idx < 0 || idx >= len(p.steps) {
		return ""
	}
	return p.steps[idx].ID
}

// Steps returns every step of the plan, nested ones included, in the
// order of their indexes: a cursor's Step indexes it. A child saga's steps
// are in its own plan (Plan.Child).
func (p *Plan) Steps() []*lang.Step {
	out := make([]*lang.Step, len(p.steps))
	for i, ps := range p.steps {
		out[i] = ps.Step
	}
	return out
}

// StepsWithChildren returns Steps, then the steps of each child saga
// (theirs included), each step once: every step a run of the plan may
// reach. Step ids are unique across them.
func (p *Plan) StepsWithChildren() []*lang.Step {
	out := p.Steps()
	seen := map[*Plan]bool{p: true}
	var walk func(q *Plan)
	walk = func(q *Plan) {
		for _, ps := range q.steps {
			if c := ps.child; c != nil && !seen[c] {
				seen[c] = true
				out = append(out, c.Steps()...)
				walk(c)
			}
		}
	}
	walk(p)
	return out
}

// pick returns what a child of the fork copies of the parent's input and
// vars: the fields its steps' expressions touch, or all of either when
// one is used whole. Vars are always a map of its own, the child writes
// into it.
func (u *uses) pick(input, vars map[string]any) (map[string]any, map[string]any) {
	if u == nil {
		return map[string]any{}, map[string]any{}
	}
	return pickFields(input, u.input, u.allInput), pickFields(vars, u.vars, u.allVars)
}

func pickFields(m map[string]any, names []string, all bool) map[string]any {
	if all {
		return maps.Clone(m)
	}
	out := make(map[string]any, len(names))
	for _, n := range names {
		if v, ok := m[n]; ok {
			out[n] = v
		}
	}
	return out
}

// item is element k of the list of the foreach s that parent waits on:
// kept in ForkItems, or, for a list whose expression reads only what does
// not change while the saga waits (input and vars, not saga.now),
// evaluated again, so that the saga does not hold the list twice.
func (p *Plan) item(s *planStep, parent *State, k int) (any, error) {
	if parent.ForkItems != nil {
		if k >= len(parent.ForkItems) {
			return nil, fmt.Errorf("%w: saga %s's foreach %s holds %d items, not %d", ErrInvalidEvent, parent.SagaID, s.ID, len(parent.ForkItems), k+1)
		}
		return parent.ForkItems[k], nil
	}
	// The fork step took the list under its own limit (valueLimit): read
	// again, an element is taken whatever its size up to an object's, so
	// that a list the step accepted always launches. Without objects, the
	// step bounded the whole list by a state's limit already.
	v, err := s.items.eval(&activation{st: parent, vars: parent.Vars, attempt: 1, now: parent.UpdatedAt, limit: MaxValueBytes})
	if err != nil {
		return nil, fmt.Errorf("saga %s: foreach %s: %w", parent.SagaID, s.ID, err)
	}
	list, ok := v.(traits.Lister)
	if !ok || list.Size().(types.Int) <= types.Int(k) {
		return nil, fmt.Errorf("%w: saga %s's foreach %s no longer has %d elements", ErrInvalidEvent, parent.SagaID, s.ID, k+1)
	}
	item, err := toNative(list.Get(types.Int(k)), MaxValueBytes)
	if err != nil {
		return nil, fmt.Errorf("saga %s: foreach %s element %d: %w", parent.SagaID, s.ID, k, err)
	}
	return item, nil
}
