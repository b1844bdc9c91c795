package sim

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// forkLedger is what the fork checks need, gathered as the run goes: a
// sequence number orders every write that lands, every effect a service
// applies and every failure a fork record takes, so the checks can say
// what happened before what.
type forkLedger struct {
	seq int
	// failedAt is, per fork record, when a write first left its failed
	// child set.
	failedAt map[string]int
	// joins counts, per fork visit (parent id @ the fork's version), the
	// join transitions that landed.
	joins map[string]int
	// appliedAt is, per idempotency key, when its effect was first
	// applied.
	appliedAt map[string]int
	// forward counts, per saga, the forward calls of its actions.
	forward map[string]int
	// children are the child runs, in the order they were created.
	children []*sagaSpec
	// Forks counts the forks that started (visits that waited on
	// children).
	forks int
}

func newForkLedger() *forkLedger {
	return &forkLedger{failedAt: map[string]int{}, joins: map[string]int{}, appliedAt: map[string]int{}, forward: map[string]int{}}
}

func (f *forkLedger) tick() int {
	if f == nil {
		return 0
	}
	f.seq++
	return f.seq
}

// noteFork notes a fork record as a write left it.
func (f *forkLedger) noteFork(w *world, key string, rec *durable.ForkRecord) {
	if f == nil || rec == nil {
		return
	}
	if rec.Failed >= 0 && f.failedAt[key] == 0 {
		f.failedAt[key] = f.tick()
	}
}

// noteApplied notes the first application of key's effect.
func (f *forkLedger) noteApplied(key string) {
	if f != nil && f.appliedAt[key] == 0 {
		f.appliedAt[key] = f.tick()
	}
}

func visitKey(id string, version uint64) string { return id + "@" + strconv.FormatUint(version, 10) }

// forkNode is one saga of a tree (a root and its child runs) at the end.
type forkNode struct {
	spec   *sagaSpec
	st     *saga.State
	writes []committedWrite // the writes that moved the version
	parked bool             // it parked (compensation_failed) at some point
	kids   []*forkNode
}

// subtree lists n and every run below it.
func (n *forkNode) subtree() []*forkNode {
	out := []*forkNode{n}
	for _, k := range n.kids {
		out = append(out, k.subtree()...)
	}
	return out
}

func (n *forkNode) subtreeParked() bool {
	for _, m := range n.subtree() {
		if m.parked {
			return true
		}
	}
	return false
}

// writeAt returns the seq of n's write of version v, or 0.
func (n *forkNode) writeAt(v uint64) int {
	for _, wr := range n.writes {
		if wr.version == v {
			return wr.seq
		}
	}
	return 0
}

// checkForks checks the invariants of forks over every saga and child run:
//
//   - fork_nothing_lost: every child run ends succeeded or compensated;
//     every fork visit a parent waited on was joined;
//   - join_once: no fork visit is joined twice;
//   - fork_compensated_exactly_once_in_order: when a root ends compensated,
//     every run below it that completed a compensable step ends compensated
//     with that step undone; the children of a fork are undone before the
//     parent's steps before the fork, after its steps after the fork (when
//     the parent undid them), and the children a parent undoes one by one
//     are undone as a whole each, the highest index first;
//   - no_step_after_fork_failed: a child created after its fork's record
//     took a failure runs no action;
//   - concurrency_kept: no more children of one fork run at once than it
//     has lanes.
//
// A run whose subtree parked is left out of the order checks: its
// compensation ends when an operator resumes it, after its parent went on.
func (w *world) checkForks(ctx context.Context, roots []*sagaSpec) {
	r := w.report
	for _, k := range []string{"fork_nothing_lost", "join_once", "fork_compensated_exactly_once_in_order", "no_step_after_fork_failed", "concurrency_kept"} {
		r.Checks[k] += 0
		r.Violations[k] += 0
	}
	f := w.forks
	nodes := map[string]*forkNode{}
	var order []*forkNode
	for _, s := range append(slices.Clone(roots), f.children...) {
		st, err := w.coord.Get(ctx, s.id)
		if err != nil {
			continue // no_saga_lost reports it
		}
		n := &forkNode{spec: s, st: st}
		for _, wr := range w.committed[s.id] {
			if !wr.kept {
				n.writes = append(n.writes, wr)
			}
			n.parked = n.parked || wr.status == durable.StatusCompensationFailed
		}
		nodes[s.id] = n
		order = append(order, n)
	}
	for _, n := range order {
		if l := n.st.Parent; l != nil {
			if p := nodes[l.ID]; p != nil {
				p.kids = append(p.kids, n)
			}
		}
	}
	// The keys each run's services saw, and its compensable successes.
	keys := map[string][]string{}
	for key, owner := range w.actions.owner {
		id, _, _ := strings.Cut(owner, "/")
		keys[id] = append(keys[id], key)
	}
	for id := range keys {
		slices.Sort(keys[id])
	}
	compensable := func(n *forkNode) []string {
		var out []string
		for _, key := range keys[n.spec.id] {
			if w.actions.compKey[key] || !w.actions.succeeded[key] || w.actions.timedOut[key] {
				continue
			}
			step, _ := n.spec.plan.Step(strings.TrimPrefix(w.actions.owner[key], n.spec.id+"/"))
			if step != nil && step.Compensate != nil {
				out = append(out, key)
			}
		}
		return out
	}
	// compRange is when the compensations of n's subtree were applied:
	// the first and the last, and whether there were any.
	compRange := func(n *forkNode) (lo, hi int, any bool) {
		for _, m := range n.subtree() {
			for _, key := range keys[m.spec.id] {
				if !w.actions.compKey[key] {
					continue
				}
				if at := f.appliedAt[key]; at > 0 {
					if !any || at < lo {
						lo = at
					}
					hi = max(hi, at)
					any = true
				}
			}
		}
		return lo, hi, any
	}

	for _, n := range order {
		id := n.spec.id
		if n.st.Parent != nil {
			r.Checks["fork_nothing_lost"]++
			if n.st.Status != durable.StatusSucceeded && n.st.Status != durable.StatusCompensated {
				w.violate("fork_nothing_lost", "child run %s (%s) ended %s at version %d", id, n.spec.plan.Name(), n.st.Status, n.st.Version)
			}
		}
		// The fork visits n waited on, and their joins.
		visits := map[uint64]string{}
		for _, wr := range n.writes {
			for _, ev := range wr.events() {
				if lang.IsFork(ev.Kind) && ev.Outcome == saga.OutcomeWaiting && !ev.Compensation {
					visits[wr.version] = ev.Step
				}
			}
		}
		for _, v := range sortedVersions(visits) {
			f.forks++
			joins := f.joins[visitKey(id, v)]
			r.Checks["join_once"]++
			if joins > 1 {
				w.violate("join_once", "saga %s (%s): fork %s of version %d joined %d times", id, n.spec.plan.Name(), visits[v], v, joins)
			}
			r.Checks["fork_nothing_lost"]++
			if joins == 0 && n.st.Status.Final() {
				w.violate("fork_nothing_lost", "saga %s (%s) ended %s, but fork %s of version %d was never joined", id, n.spec.plan.Name(), n.st.Status, visits[v], v)
			}
		}

		if n.st.Parent == nil {
			// A root that compensated leaves nothing below it done.
			r.Checks["fork_compensated_exactly_once_in_order"]++
			if n.st.Status == durable.StatusCompensated {
				for _, m := range n.subtree()[1:] {
					for _, key := range compensable(m) {
						if !w.actions.applied[compensationKey(key)] {
							w.violate("fork_compensated_exactly_once_in_order", "saga %s (%s) compensated, but child run %s (%s, %s, failure %s) never undid %s",
								id, n.spec.plan.Name(), m.spec.id, m.spec.plan.Name(), m.st.Status, w.failureType(m.spec, m.st), key)
						}
					}
				}
			}
		}

		// Children against the parent's own steps, and against each other.
		own := compensable(n)
		for i, c := range n.kids {
			if c.subtreeParked() {
				continue
			}
			lo, hi, any := compRange(c)
			if !any {
				continue
			}
			fork := n.writeAt(c.st.Parent.Version)
			r.Checks["fork_compensated_exactly_once_in_order"]++
			for _, key := range own {
				o := stepOrder{fork: fork, done: f.appliedAt[key], undone: f.appliedAt[compensationKey(key)], lo: lo, hi: hi, undoing: c.st.Undoing}
				if what := o.broken(); what != "" {
					w.violate("fork_compensated_exactly_once_in_order", "saga %s (%s): %s, %s fork %s, %s child run %s", id, n.spec.plan.Name(), key, o.side(), c.st.Parent.Step, what, c.spec.id)
				}
			}
			if !c.st.Undoing {
				continue
			}
			for _, d := range n.kids[i+1:] {
				l, m := c.st.Parent, d.st.Parent
				if !d.st.Undoing || m.Step != l.Step || m.Seq != l.Seq || d.subtreeParked() {
					continue
				}
				dlo, dhi, dany := compRange(d)
				if !dany {
					continue
				}
				// The higher index is undone, as a whole, first.
				hiRun, loRun := c, d
				hlo, hhi, llo, lhi := lo, hi, dlo, dhi
				if m.Index > l.Index {
					hiRun, loRun = d, c
					hlo, hhi, llo, lhi = dlo, dhi, lo, hi
				}
				_ = hlo
				_ = lhi
				if hhi > llo {
					w.violate("fork_compensated_exactly_once_in_order", "saga %s (%s), fork %s: child run %s was undone (from %d) before child run %s had finished (at %d)",
						id, n.spec.plan.Name(), l.Step, loRun.spec.id, llo, hiRun.spec.id, hhi)
				}
			}
		}

		if l := n.st.Parent; l != nil {
			// No step after the fork failed.
			r.Checks["no_step_after_fork_failed"]++
			if fa := f.failedAt[durable.ForkKey(l.ID, l.Step, l.Seq)]; fa > 0 && len(n.writes) > 0 && n.writes[0].seq > fa && f.forward[id] > 0 {
				w.violate("no_step_after_fork_failed", "child run %s (%s) was created after its fork %s failed, and ran %d actions", id, n.spec.plan.Name(), l.Step, f.forward[id])
			}
		}
		w.checkConcurrency(n)
	}
}

// stepOrder is one of a parent's compensable steps against one child run
// of a fork of the parent, as seqs of the fork ledger: the parent's fork
// write, the step's effect and its compensation (0: not undone), and the
// first and last compensation of the child's subtree; undoing says the
// parent undid the child as a whole.
type stepOrder struct {
	fork, done, undone, lo, hi int
	undoing                    bool
}

func (o stepOrder) side() string {
	if o.done < o.fork {
		return "done before"
	}
	return "done after"
}

// broken says how the step breaks the order against the child, or "".
//
// A step done before the fork is undone after the child's compensations
// have all run. A step done after the fork is undone before the parent
// undoes the child, when both are undone in the one backward pass: the
// step was done before the child began undoing. A fork whose failure a
// catch routes undoes its children before the parent goes on (the catch
// routes it "once the children it ran are undone", docs/DEFINITIONS.md),
// so a step after the catch is done after the children's compensations
// and owes them no order; it may not be done while they still run.
func (o stepOrder) broken() string {
	switch {
	case o.done < o.fork:
		if o.undone > 0 && o.undone < o.hi {
			return "undone before its compensations ended in"
		}
	case o.lo < o.done && o.done < o.hi:
		return "done while compensations ran in"
	case o.undoing && o.done < o.lo && o.undone > o.lo:
		return "undone after undoing began in"
	}
	return ""
}

// checkConcurrency checks that no more of n's children of one fork visit
// run at once than the fork has lanes: a child runs from its create to
// its first final write.
func (w *world) checkConcurrency(n *forkNode) {
	type span struct{ from, to int }
	byFork := map[string][]span{}
	lanes := map[string]int{}
	var forks []string
	for _, c := range n.kids {
		l := c.st.Parent
		k := l.Step + "#" + strconv.FormatUint(l.Seq, 10)
		if _, ok := lanes[k]; !ok {
			forks = append(forks, k)
		}
		lanes[k] = l.Lanes
		s := span{from: -1, to: 1 << 62}
		for _, wr := range c.writes {
			if s.from < 0 {
				s.from = wr.seq
			}
			if wr.status.Final() {
				s.to = wr.seq
				break
			}
		}
		byFork[k] = append(byFork[k], s)
	}
	for _, k := range forks {
		w.report.Checks["concurrency_kept"]++
		spans := byFork[k]
		most := 0
		for _, s := range spans {
			running := 0
			for _, t := range spans {
				if t.from <= s.from && s.from < t.to {
					running++
				}
			}
			most = max(most, running)
		}
		if most > lanes[k] {
			w.violate("concurrency_kept", "saga %s (%s): fork %s ran %d children at once, over its %d lanes", n.spec.id, n.spec.plan.Name(), k, most, lanes[k])
		}
	}
}

func sortedVersions(m map[uint64]string) []uint64 {
	out := make([]uint64, 0, len(m))
	for v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}
