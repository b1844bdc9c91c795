package saga

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// successors lists the steps that can follow step i (a negative index is
// its list's exit: end or branchEnd), and whether each edge is taken on
// success (so the step's writes happened). Edges stay in the step's list:
// a target in another list, refused already, counts as the list's exit.
func (c *compiler) successors(i int) (succ []int, onSuccess []bool) {
	ps := c.plan.steps[i]
	exit := c.plan.lists[ps.list].exit()
	add := func(j int, ok bool) {
		succ = append(succ, j)
		onSuccess = append(onSuccess, ok)
	}
	lookup := func(id string) (int, bool) {
		if id == "" {
			return exit, true
		}
		j, ok := c.plan.index[id]
		if ok && c.plan.steps[j].list != ps.list {
			return exit, true
		}
		return j, ok
	}
	switch ps.Kind {
	case lang.KindAction, lang.KindSet, lang.KindAssert, lang.KindWait, lang.KindAwait, lang.KindParallel, lang.KindForeach, lang.KindSaga, "": // "": a shape error, reported already; assume it falls through
		add(ps.nextIndex, true)
	case lang.KindSwitch:
		hasDefault := false
		for _, cs := range ps.Switch {
			if j, ok := lookup(cs.Next); ok {
				add(j, true)
			}
			hasDefault = hasDefault || cs.Default
		}
		if !hasDefault {
			add(ps.nextIndex, true)
		}
	}
	for _, ct := range ps.Catch {
		if j, ok := lookup(ct.Next); ok {
			add(j, false)
		}
	}
	return succ, onSuccess
}

// checkGraph finds unreachable steps and loops that cannot end, marks the
// steps inside loops, and works out which vars may be set before each step.
func (c *compiler) checkGraph() {
	n := len(c.plan.steps)
	succ := make([][]int, n)
	onSuccess := make([][]bool, n)
	for i := range n {
		succ[i], onSuccess[i] = c.successors(i)
	}

	// Reachability from the first step of each list whose fork is
	// reachable (the saga's own list first, then each after its fork's).
	seen := make([]bool, n)
	for _, l := range c.plan.lists {
		if l.n == 0 || (l.fork >= 0 && !seen[l.fork]) {
			continue
		}
		stack := []int{l.first}
		seen[l.first] = true
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, j := range succ[i] {
				if j >= 0 && !seen[j] {
					seen[j] = true
					stack = append(stack, j)
				}
			}
		}
	}
	for i, ok := range seen {
		s := c.plan.steps[i]
		if fork := c.plan.lists[s.list].fork; !ok && c.plan.index[s.ID] == i && (fork < 0 || seen[fork]) {
			what := "the first step"
			if fork >= 0 {
				what = "the first step of " + c.listName(s.list)
			}
			c.errorf(s.Pos, s.ID, "", "unreachable: no path from %s leads here", what)
		}
	}

	defer c.markKeptOutputs()

	// Loops: strongly connected components with a cycle.
	for _, comp := range sccs(succ) {
		if len(comp) == 1 && !contains(succ[comp[0]], comp[0]) {
			continue
		}
		in := map[int]bool{}
		for _, i := range comp {
			in[i] = true
			c.plan.steps[i].inLoop = true
		}
		hasAction, hasExit := false, false
		first := comp[0]
		for _, i := range comp {
			if k := c.plan.steps[i].Kind; k == lang.KindAction || k == lang.KindWait || k == lang.KindAwait || lang.IsFork(k) {
				hasAction = true // a pass takes a message, or time (a fork: its join)
			}
			if i < first {
				first = i
			}
			for _, j := range succ[i] {
				if j < 0 || !in[j] {
					hasExit = true
				}
			}
		}
		s := c.plan.steps[first]
		names := c.loopNames(comp)
		switch {
		case !hasExit:
			c.errorf(s.Pos, s.ID, "", "loop with no way out: %s", names)
		case !hasAction:
			c.errorf(s.Pos, s.ID, "", "loop of steps that do no work between passes (%s): put an action, a wait or an await in it", names)
		}
	}
	c.reachable = seen
	c.flowVars(succ, onSuccess, seen)
}

// markKeptOutputs sets keepOut on the compensable actions whose var may be
// overwritten before their compensation reads it (after the loops are known).
func (c *compiler) markKeptOutputs() {
	writers := map[string]int{}
	for _, s := range c.plan.steps {
		if s.Out != "" {
			writers[s.Out]++
		}
		for _, a := range s.Set {
			writers[a.Name]++
		}
	}
	for _, s := range c.plan.steps {
		s.keepOut = s.Kind == lang.KindAction && s.Out != "" && s.Compensate != nil && (s.inLoop || writers[s.Out] > 1)
	}
}

func (c *compiler) loopNames(comp []int) string {
	ids := make([]string, 0, len(comp))
	for i := range c.plan.steps {
		if contains(comp, i) {
			ids = append(ids, c.plan.steps[i].ID)
		}
	}
	return strings.Join(ids, " -> ") + " -> " + ids[0]
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// sccs returns the strongly connected components of the step graph (Tarjan).
func sccs(succ [][]int) [][]int {
	n := len(succ)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var (
		stack []int
		out   [][]int
		next  int
	)
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range succ[v] {
			if w < 0 {
				continue
			}
			if index[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			out = append(out, comp)
		}
	}
	for v := range n {
		if index[v] < 0 {
			visit(v)
		}
	}
	return out
}

// flowVars computes, for each step, the vars some path to it may have set.
// A branch or a body starts with the vars of its fork step (those set
// before the fork); what its steps set stays in it: after the fork, only
// the fork's out is set.
func (c *compiler) flowVars(succ [][]int, onSuccess [][]bool, reachable []bool) {
	n := len(c.plan.steps)
	writes := make([][]string, n)
	c.allWrites = map[string]bool{}
	c.listWrites = map[string]int{}
	for i, ps := range c.plan.steps {
		if ps.Out != "" {
			writes[i] = append(writes[i], ps.Out)
		}
		for _, a := range ps.Set {
			writes[i] = append(writes[i], a.Name)
		}
		for _, w := range writes[i] {
			c.allWrites[w] = true
			if _, ok := c.listWrites[w]; !ok && ps.list != 0 {
				c.listWrites[w] = ps.list
			}
		}
	}
	avail := make([]map[string]bool, n)
	for i := range avail {
		avail[i] = map[string]bool{}
	}
	// List by list, each after the list of its fork, whose vars are known
	// by then. Every reachable step starts queued: a step that gains
	// nothing from its predecessors must still pass its own writes on.
	queued := make([]bool, n)
	for _, l := range c.plan.lists {
		if l.n == 0 {
			continue
		}
		if l.fork >= 0 {
			maps.Copy(avail[l.first], avail[l.fork])
		}
		var work []int
		for i := l.first; i < l.first+l.n; i++ {
			if reachable[i] {
				work = append(work, i)
				queued[i] = true
			}
		}
		c.flowList(work, queued, succ, onSuccess, writes, avail)
	}
	c.avail = avail
	c.sure = c.sureVars(succ, onSuccess, reachable, writes)
}

// flowList spreads avail along the edges of one list from the queued steps.
func (c *compiler) flowList(work []int, queued []bool, succ [][]int, onSuccess [][]bool, writes [][]string, avail []map[string]bool) {
	for len(work) > 0 {
		i := work[0]
		work = work[1:]
		queued[i] = false
		for k, j := range succ[i] {
			if j < 0 {
				continue
			}
			changed := false
			add := func(name string) {
				if !avail[j][name] {
					avail[j][name] = true
					changed = true
				}
			}
			for name := range avail[i] {
				add(name)
			}
			if onSuccess[i][k] {
				for _, name := range writes[i] {
					add(name)
				}
			}
			if changed && !queued[j] {
				queued[j] = true
				work = append(work, j)
			}
		}
	}
}

// sureVars computes, for each reachable step, the vars every path to it has
// set: the meet over its incoming edges of what the source had plus what
// the edge adds (a step's writes, on a success edge only). Vars are never
// removed, so these exist whenever the step runs, and ever after. Sets are
// bitsets over the sorted var names; only steps with a compensation get
// their set as a map (the others are nil): nothing else reads it.
func (c *compiler) sureVars(succ [][]int, onSuccess [][]bool, reachable []bool, writes [][]string) []map[string]bool {
	n := len(succ)
	names := slices.Sorted(maps.Keys(c.allWrites))
	words := (len(names) + 63) / 64
	bit := make(map[string]int, len(names))
	for k, name := range names {
		bit[name] = k
	}
	adds := make([][]uint64, n) // what a success edge out of step i adds
	for i, ws := range writes {
		adds[i] = make([]uint64, words)
		for _, w := range ws {
			adds[i][bit[w]/64] |= 1 << (bit[w] % 64)
		}
	}
	preds := make([][]edge, n)
	for i := range n {
		if !reachable[i] {
			continue
		}
		for k, j := range succ[i] {
			if j >= 0 {
				preds[j] = append(preds[j], edge{i, onSuccess[i][k]})
			}
		}
	}
	sure := make([][]uint64, n)
	for i := range sure {
		sure[i] = make([]uint64, words)
		for w := range sure[i] { // the sets start full and shrink
			sure[i][w] = ^uint64(0)
		}
	}
	// List by list, each after the list of its fork. A list's first step
	// meets what its entry brings: nothing for the saga's first step, the
	// fork step's vars for a branch or a body. Iterate to the greatest
	// fixed point: sets only shrink, so this ends.
	meet := make([]uint64, words)
	entry := make([]uint64, words)
	for _, l := range c.plan.lists {
		if l.n == 0 {
			continue
		}
		clear(entry)
		if l.fork >= 0 {
			copy(entry, sure[l.fork])
		}
		c.sureList(l, sure, preds, reachable, entry, meet, adds)
	}
	out := make([]map[string]bool, n)
	for i, ps := range c.plan.steps {
		if ps.Compensate == nil {
			continue
		}
		out[i] = map[string]bool{}
		for k, name := range names {
			if sure[i][k/64]&(1<<(k%64)) != 0 {
				out[i][name] = true
			}
		}
	}
	return out
}

type edge struct {
	from    int
	success bool
}

// sureList iterates the sure sets of one list's steps to their fixed point.
func (c *compiler) sureList(l stepList, sure [][]uint64, preds [][]edge, reachable []bool, entry, meet []uint64, adds [][]uint64) {
	for changed := true; changed; {
		changed = false
		for j := l.first; j < l.first+l.n; j++ {
			if !reachable[j] || (j != l.first && len(preds[j]) == 0) {
				continue
			}
			for w := range meet {
				meet[w] = ^uint64(0)
			}
			if j == l.first {
				copy(meet, entry)
			}
			for _, e := range preds[j] {
				for w := range meet {
					in := sure[e.from][w]
					if e.success {
						in |= adds[e.from][w]
					}
					meet[w] &= in
				}
			}
			if !slices.Equal(meet, sure[j]) {
				copy(sure[j], meet)
				changed = true
			}
		}
	}
}

// checkReads reports vars an expression reads that no earlier step sets.
func (c *compiler) checkReads(s *lang.Step, field string, pos lang.Pos, prg *program) {
	if c.allowed == nil || prg == nil {
		return
	}
	for _, name := range prg.reads {
		if c.allowed[name] {
			continue
		}
		why := "no earlier step sets it"
		switch {
		case !c.allWrites[name]:
			why = "no step sets it"
		case c.compensating:
			why = "it may not exist when this compensation runs: a compensation reads only vars written on every path up to and including its own step"
		}
		if li, ok := c.listWrites[name]; ok && !c.allowed[name] && !c.compensating {
			if i, ok := c.plan.index[s.ID]; !ok || !c.inside(c.plan.steps[i].list, li) {
				why += fmt.Sprintf(" here (a step of %s sets it, and what a branch or foreach body sets stays in it: after the fork, read the fork's out)", c.listName(li))
			}
		}
		c.errorf(pos, s.ID, field, "reads vars.%s, but %s%s", name, why, c.suggestVar(name))
	}
}

// inside reports whether list li is list outer or nested in it.
func (c *compiler) inside(li, outer int) bool {
	for {
		if li == outer {
			return true
		}
		fork := c.plan.lists[li].fork
		if fork < 0 {
			return false
		}
		li = c.plan.steps[fork].list
	}
}

func (c *compiler) suggestVar(name string) string {
	// The closest name, and of those the first in sorted order, so the
	// answer never varies.
	best, bestD := "", 3
	for _, other := range slices.Sorted(maps.Keys(c.allWrites)) {
		if d := editDistance(name, other); d < bestD && other != name {
			best, bestD = other, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean vars.%s?)", best)
}
