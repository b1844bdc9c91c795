package saga

import (
	"fmt"
	"math"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// SignalRoute says where, for the run st of a saga's tree, an await may
// take a signal: the run waits on one now, one of its own steps may take
// it later, or the fork it waits on holds one among its children (a
// branch's or body's steps, a child saga's, at any depth).
type SignalRoute struct {
	AwaitsNow bool // the run waits on an await of the signal
	// Later: an await of the run's own steps may take the signal later,
	// and has room for it: the run keeps fewer of the name (for itself,
	// not named for a child) than the awaits of the name ahead of it can
	// take (any number, when one is in a loop). The run keeps it until
	// then.
	Later  bool
	InFork bool // the fork the run waits on holds an await of the signal in its children
	// Anywhere: an await of the signal is in the run's plan at all, in its
	// own steps or in any fork's children at any depth; when false, no
	// run of the tree can ever take it.
	Anywhere bool
}

// RouteSignal says where st's run of the tree may take the signal name.
func (p *Plan) RouteSignal(st *State, name string) SignalRoute {
	var r SignalRoute
	cur, pending := st.Pending()
	if pending && cur.Wait && st.Status == durable.StatusWaiting && !cur.Compensating && cur.Step < len(p.steps) {
		if s := p.steps[cur.Step]; s.Kind == lang.KindAwait && s.Await.Signal == name {
			r.AwaitsNow = true
		}
	}
	if pending && !cur.Compensating {
		if room := p.awaitRoom(cur.Step, name); room > 0 {
			kept := 0
			for _, d := range st.Kept {
				if d.Signal == name && d.Child == 0 {
					kept++
				}
			}
			r.Later = kept < room
		}
	}
	if pending && cur.Fork && !cur.Compensating && p.isFork(cur.Step) {
		r.InFork = p.forkAwaits(cur.Step, name)
	}
	r.Anywhere = p.awaits(name)
	return r
}

// awaitAhead reports whether an await of the signal name can still run in
// the list of step from: from itself, or a step reachable from it by the
// steps' next, switch cases and catch routes. An await the run has passed,
// with no way back to it, takes nothing more.
func (p *Plan) awaitAhead(from int, name string) bool {
	seen := map[int]bool{}
	queue := []int{from}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		if i < 0 || i >= len(p.steps) || seen[i] {
			continue
		}
		seen[i] = true
		s := p.steps[i]
		if s.Kind == lang.KindAwait && s.Await.Signal == name {
			return true
		}
		queue = append(queue, s.nextIndex)
		for _, c := range s.cases {
			queue = append(queue, c.nextIndex)
		}
		for _, c := range s.routes {
			queue = append(queue, c.nextIndex)
		}
	}
	return false
}

// awaitRoom is how many signals of the name the awaits reachable from the
// step from (itself included) can take: one for each such await, any
// number (math.MaxInt) when one of them is in a loop.
func (p *Plan) awaitRoom(from int, name string) int {
	reach := func(from int, stop func(int) bool) bool {
		seen := map[int]bool{}
		queue := []int{from}
		for len(queue) > 0 {
			i := queue[0]
			queue = queue[1:]
			if i < 0 || i >= len(p.steps) || seen[i] {
				continue
			}
			seen[i] = true
			if stop(i) {
				return true
			}
			s := p.steps[i]
			queue = append(queue, s.nextIndex)
			for _, c := range s.cases {
				queue = append(queue, c.nextIndex)
			}
			for _, c := range s.routes {
				queue = append(queue, c.nextIndex)
			}
		}
		return false
	}
	var awaits []int
	reach(from, func(i int) bool {
		if s := p.steps[i]; s.Kind == lang.KindAwait && s.Await.Signal == name {
			awaits = append(awaits, i)
		}
		return false
	})
	for _, a := range awaits {
		s := p.steps[a]
		next := []int{s.nextIndex}
		for _, c := range s.routes {
			next = append(next, c.nextIndex)
		}
		for _, n := range next {
			if reach(n, func(i int) bool { return i == a }) {
				return math.MaxInt // in a loop: it takes any number
			}
		}
	}
	return len(awaits)
}

// ForkTakesSignals reports whether the children of the fork step f may
// take any signal: an await in its branches or body, in forks nested in
// them, or in a child saga's plan, at any depth.
func (p *Plan) ForkTakesSignals(f int) bool {
	if f < 0 || f >= len(p.steps) || !p.isFork(f) {
		return false
	}
	if s := p.steps[f]; s.Kind == lang.KindSaga {
		return s.child != nil && s.child.awaitsAny()
	}
	for _, ps := range p.steps {
		if !p.within(ps.list, f) {
			continue
		}
		if ps.Kind == lang.KindAwait || ps.Kind == lang.KindSaga && ps.child != nil && ps.child.awaitsAny() {
			return true
		}
	}
	return false
}

// awaitsAny reports whether any step of the plan, or of a child saga's at
// any depth, awaits a signal.
func (p *Plan) awaitsAny() bool {
	for _, ps := range p.steps {
		if ps.Kind == lang.KindAwait || ps.Kind == lang.KindSaga && ps.child != nil && ps.child.awaitsAny() {
			return true
		}
	}
	return false
}

// TakesSignal reports whether a run of the plan may ever take the signal
// name: an await of it is among the plan's steps (its forks' included),
// or a child saga's at any depth. A saga of a plan that does not is
// refused the signal (ErrNotReceiving) whatever its state.
func (p *Plan) TakesSignal(name string) bool { return p.awaits(name) }

// awaits reports whether any step of the plan, or of a child saga's at
// any depth, awaits the signal name.
func (p *Plan) awaits(name string) bool {
	for _, ps := range p.steps {
		switch {
		case ps.Kind == lang.KindAwait && ps.Await.Signal == name:
			return true
		case ps.Kind == lang.KindSaga && ps.child != nil && ps.child.awaits(name):
			return true
		}
	}
	return false
}

// forkAwaits reports whether the fork step f holds an await of the signal
// name among its children: in its branches or body, in forks nested in
// them, or in a child saga's plan.
func (p *Plan) forkAwaits(f int, name string) bool {
	if s := p.steps[f]; s.Kind == lang.KindSaga {
		return s.child != nil && s.child.awaits(name)
	}
	for _, ps := range p.steps {
		if !p.within(ps.list, f) {
			continue
		}
		switch {
		case ps.Kind == lang.KindAwait && ps.Await.Signal == name:
			return true
		case ps.Kind == lang.KindSaga && ps.child != nil && ps.child.awaits(name):
			return true
		}
	}
	return false
}

// within reports whether the step list l is a branch or body of the fork
// step f, or of a fork nested in one.
func (p *Plan) within(l, f int) bool {
	for fk := p.lists[l].fork; fk >= 0; fk = p.lists[p.steps[fk].list].fork {
		if fk == f {
			return true
		}
	}
	return false
}

// HandedTo lists the kept signals of parent that the child k of the fork
// it waits on is given as it starts: those no await of the parent's own
// after the fork takes, that the child's run may take (its own steps, or
// a fork of its), one to each child that may, in index order (the second
// approval to the second iteration). The parent keeps them until the fork
// joins, but can never take them.
func (p *Plan) HandedTo(parent *State, k int) []Delivery {
	if len(parent.Kept) == 0 {
		return nil
	}
	cur, ok := parent.Pending()
	if !ok || !cur.Fork || cur.Compensating || !p.isFork(cur.Step) {
		return nil
	}
	handed := p.handedOut(parent, cur)
	var out []Delivery
	for _, d := range parent.Kept {
		if child, ok := handed[d.ID]; ok && child == k {
			d.Child = 0 // the child's own fork, if any, decides anew
			out = append(out, d)
		}
	}
	return out
}

// KeepFor names the child of the fork parent waits on that a signal of
// name, kept by parent now, is to be given as it starts: the first, in
// index order, that has yet to start (started reports those that have,
// or may have), whose run may take it, and that no other kept signal of
// the name goes to. -1 when there is none.
func (p *Plan) KeepFor(parent *State, name string, started func(k int) bool) int {
	cur, ok := parent.Pending()
	if !ok || !cur.Fork || cur.Compensating || !p.isFork(cur.Step) {
		return -1
	}
	taken := map[int]bool{}
	handed := p.handedOut(parent, cur)
	for _, d := range parent.Kept {
		if child, ok := handed[d.ID]; ok && d.Signal == name {
			taken[child] = true
		}
	}
	for k := range cur.Children {
		if !taken[k] && !started(k) && p.childMayTake(cur, name, k) {
			return k
		}
	}
	return -1
}

// handedOut says which child of the fork cur each kept signal of parent
// goes to, by delivery id: the signals no await of the saga's own after
// the fork takes; one kept for a child (Delivery.Child) to that child,
// and of the others the n-th of a name to the n-th child whose run may
// take it.
func (p *Plan) handedOut(parent *State, cur Cursor) map[string]int {
	out := map[string]int{}
	nth := map[string]int{} // kept signals of a name handed out so far
	for _, d := range parent.Kept {
		if d.Signal != "" && d.Child > 0 {
			if d.Child <= cur.Children {
				out[d.ID] = d.Child - 1
			}
			continue
		}
		if d.Signal == "" || p.awaitAhead(p.steps[cur.Step].nextIndex, d.Signal) {
			continue // a completion, or the saga's own await after the fork takes it
		}
		n := nth[d.Signal]
		nth[d.Signal]++
		if child := p.childAwaiting(cur, d.Signal, n); child >= 0 {
			out[d.ID] = child
		}
	}
	return out
}

// childAwaiting is the index of the child of the fork cur that is given
// the n-th (from 0) kept signal of that name: each child whose run may
// take it gets one, in index order; -1 when there are not that many.
func (p *Plan) childAwaiting(cur Cursor, name string, n int) int {
	s := p.steps[cur.Step]
	switch s.Kind {
	case lang.KindSaga, lang.KindForeach:
		// One plan for every child: the n-th child.
		if p.forkAwaits(cur.Step, name) && n < cur.Children {
			return n
		}
	default:
		for b, first := range s.branches {
			l := p.steps[first].list
			for _, ps := range p.steps {
				if ps.list != l && !p.withinList(ps.list, l) {
					continue
				}
				if (ps.Kind == lang.KindAwait && ps.Await.Signal == name) || (ps.Kind == lang.KindSaga && ps.child != nil && ps.child.awaits(name)) {
					if n == 0 {
						return b
					}
					n--
					break
				}
			}
		}
	}
	return -1
}

// childMayTake reports whether the run of child k of the fork cur may
// take a signal of that name: every child of a foreach or child saga
// when its plan awaits it, the branch of a parallel whose steps do.
func (p *Plan) childMayTake(cur Cursor, name string, k int) bool {
	s := p.steps[cur.Step]
	switch s.Kind {
	case lang.KindSaga, lang.KindForeach:
		return p.forkAwaits(cur.Step, name)
	}
	if k < 0 || k >= len(s.branches) {
		return false
	}
	l := p.steps[s.branches[k]].list
	for _, ps := range p.steps {
		if ps.list != l && !p.withinList(ps.list, l) {
			continue
		}
		if (ps.Kind == lang.KindAwait && ps.Await.Signal == name) || (ps.Kind == lang.KindSaga && ps.child != nil && ps.child.awaits(name)) {
			return true
		}
	}
	return false
}

// withinList reports whether the step list l is nested in a fork whose
// step is in the list outer, at any depth.
func (p *Plan) withinList(l, outer int) bool {
	for fk := p.lists[l].fork; fk >= 0; fk = p.lists[p.steps[fk].list].fork {
		if p.steps[fk].list == outer {
			return true
		}
	}
	return false
}

// notAwaited is the error for a signal no run of the tree can take.
func notAwaited(st *State, name string) error {
	return fmt.Errorf("%w: saga %s has no await of signal %s, in its own steps or in any fork's (branches, iterations, child sagas): no run of it can ever take it", ErrNotReceiving, st.SagaID, name)
}
