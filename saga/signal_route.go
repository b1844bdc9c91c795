package saga

import (
	"fmt"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/lang"
)

// SignalRoute says where, for the run st of a saga's tree, an await may
// take a signal: the run waits on one now, one of its own steps may take
// it later, or the fork it waits on holds one among its children (a
// branch's or body's steps, a child saga's, at any depth).
type SignalRoute struct {
	AwaitsNow bool // the run waits on an await of the signal
	Later     bool // an await of the run's own steps takes the signal: the run keeps it until then
	InFork    bool // the fork the run waits on holds an await of the signal in its children
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
	own, _ := p.awaitedBy(st, name)
	r.Later = own
	if pending && cur.Fork && !cur.Compensating && p.isFork(cur.Step) {
		r.InFork = p.forkAwaits(cur.Step, name)
	}
	r.Anywhere = p.awaits(name)
	return r
}

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
// steps takes, that the child's run may take (its own steps, or a fork
// of its), each to the first child (by index) that may. The parent keeps
// them too, but can never take them.
func (p *Plan) HandedTo(parent *State, k int) []Delivery {
	if len(parent.Kept) == 0 {
		return nil
	}
	cur, ok := parent.Pending()
	if !ok || !cur.Fork || cur.Compensating || !p.isFork(cur.Step) {
		return nil
	}
	var out []Delivery
	for _, d := range parent.Kept {
		if d.Signal == "" {
			continue
		}
		if own, _ := p.awaitedBy(parent, d.Signal); own {
			continue
		}
		if first := p.firstChildAwaiting(cur, d.Signal); first == k {
			out = append(out, d)
		}
	}
	return out
}

// firstChildAwaiting is the index of the first child of the fork cur
// whose run may take the signal name, or -1.
func (p *Plan) firstChildAwaiting(cur Cursor, name string) int {
	s := p.steps[cur.Step]
	switch s.Kind {
	case lang.KindSaga, lang.KindForeach:
		// One plan for every child: the first.
		if p.forkAwaits(cur.Step, name) {
			return 0
		}
	default:
		for b, first := range s.branches {
			l := p.steps[first].list
			for _, ps := range p.steps {
				if ps.list != l && !p.withinList(ps.list, l) {
					continue
				}
				if (ps.Kind == lang.KindAwait && ps.Await.Signal == name) || (ps.Kind == lang.KindSaga && ps.child != nil && ps.child.awaits(name)) {
					return b
				}
			}
		}
	}
	return -1
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
