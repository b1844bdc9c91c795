package proptest

import (
	"fmt"
	"slices"
	"strings"
)

// forkShare is the share of definitions that get fork steps.
const forkShare = 0.2

// sharedSignal is a signal awaits of several lists of a tree wait for:
// several runs may await it at once (and refuse it, naming them).
const sharedSignal = "shared"

// forkState is what the generator needs for forks (docs/DEFINITIONS.md,
// "Forks"): the list being written and the files of the bundle.
type forkState struct {
	files map[string][]byte // child sagas by path; nil: no forks in this case
	forks int
	depth int // forks around the list being written (a child saga counts one)
	// calm cases write what validation accepts, mostly: the noise of
	// the other cases, over the many steps of a tree, leaves few valid.
	calm     bool
	plain    bool     // fork lists are mostly plain (plainList)
	maxDepth int      // the deepest list that may hold a fork
	scope    []string // the foreach names the list's expressions see (item, index)
	// invalid is "pending" while the case should get one mistake that
	// validation refuses, the mistake once written, "" for none.
	invalid string
}

// forkKind draws a fork step's kind.
func (g *gen) forkKind() string {
	switch x := g.r.IntN(100); {
	case x < 40:
		return "parallel"
	case x < 75:
		return "foreach"
	}
	return "child"
}

// writesOf is the vars each step of a list writes; prefix keeps the vars
// of a fork's list apart from those of the list around it.
func (g *gen) writesOf(kinds []string, prefix string) [][]string {
	writes := make([][]string, len(kinds))
	for i, k := range kinds {
		switch k {
		case "action":
			if g.chance(0.65) {
				writes[i] = []string{fmt.Sprintf("%so%d", prefix, i)}
			}
		case "set":
			for j := range 1 + g.r.IntN(3) {
				writes[i] = append(writes[i], fmt.Sprintf("%sv%d", prefix, (i+j)%4))
			}
		case "grow_init", "grow":
			writes[i] = []string{"big"}
		case "grow_call":
			if g.chance(0.5) {
				writes[i] = []string{"echoed"}
			}
		case "grow_done":
			writes[i] = []string{"grown"}
		case "await":
			if g.chance(0.7) {
				writes[i] = []string{fmt.Sprintf("%sw%d", prefix, i)} // only this await writes it: the oracle reads it
			}
		case "parallel", "foreach", "child":
			if g.chance(0.7) {
				writes[i] = []string{fmt.Sprintf("%sf%d", prefix, i)}
			}
		}
	}
	return writes
}

// knownBefore is, for each step of a list, the vars written before it:
// those known where the list starts, then the list's own, in order.
func knownBefore(start []string, writes [][]string) [][]string {
	known := make([][]string, len(writes))
	seen := slices.Clone(start)
	for i := range writes {
		known[i] = slices.Clone(seen)
		for _, w := range writes[i] {
			if !slices.Contains(seen, w) {
				seen = append(seen, w)
			}
		}
	}
	return known
}

// list writes the steps of a branch, a foreach body or a child saga, as
// the saga's own list is written (two spaces before "- id"): one to three
// steps of the usual kinds, ids prefixed by id (unique across the
// bundle), reading the vars known where it starts and its own; a fork
// among them while the nesting allows. extra steps go first.
func (g *gen) list(id string, known []string, extra string) string {
	ids, kinds, outer := g.ids, g.kinds, g.known
	defer func() { g.ids, g.kinds, g.known = ids, kinds, outer }()
	n := 1 + g.r.IntN(3)
	if g.plain && extra == "" && g.chance(0.7) {
		return g.plainList(id, n)
	}
	g.kinds = make([]string, n)
	for i := range g.kinds {
		g.kinds[i] = g.kind(i, n)
		switch {
		case i < n-1 && g.depth < g.maxDepth && g.chance(0.15):
			g.kinds[i] = g.forkKind()
		case i < n-1 && g.chance(0.08):
			g.kinds[i] = "await" // signals routed through the tree
		}
		if g.calm && i == n-1 && g.kinds[i] == "switch" {
			g.kinds[i] = "set"
		}
	}
	g.ids = make([]string, n)
	for i := range g.ids {
		g.ids[i] = fmt.Sprintf("%s_%d", id, i)
	}
	writes := g.writesOf(g.kinds, id+"_")
	g.known = knownBefore(known, writes)
	var b strings.Builder
	b.WriteString(extra)
	for i, k := range g.kinds {
		g.step(&b, i, k, writes[i])
	}
	return b.String()
}

// plainList is a list of n actions that succeed nineteen times in
// twenty, each with a compensation that succeeds: the forks of such lists
// succeed, and a failure after them undoes them child by child.
func (g *gen) plainList(id string, n int) string {
	var b strings.Builder
	for i := range n {
		name := fmt.Sprintf("svc.p%d", len(g.profiles))
		var p Profile
		p[Echo], p[Record], p[Declined] = 10, 9, 1
		g.profiles[name] = p
		undo := fmt.Sprintf("svc.undo%d", len(g.profiles))
		g.profiles[undo] = Profile{Echo: 1}
		fmt.Fprintf(&b, "  - id: %s_%d\n    action: %s\n    out: %s_o%d\n    compensate: {action: %s}\n", id, i, name, id, i, undo)
	}
	return b.String()
}

// indent puts n spaces before every line of text.
func indent(text string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pad + l
	}
	return strings.Join(lines, "") + "\n"
}

// take reports whether the pending mistake should be written here, as
// one of the kinds the fork allows.
func (g *gen) take(kinds ...string) string {
	if g.invalid != "pending" || !g.chance(0.6) {
		return ""
	}
	g.invalid = kinds[g.r.IntN(len(kinds))]
	return g.invalid
}

// fork writes fork step i: a parallel of 1 to 4 branches (20, the limit,
// now and then; 21 in wild cases), a foreach over the input's list or a
// literal one (empty, small, or one past lang.MaxForeachItems: the step
// fails when it runs), or a child saga; with out, catch and next as
// other steps. A quarter of the fork cases get one mistake validation
// must refuse: a branch reading a var another branch writes, a next
// leaving its list, a child step id that is also a step id of the
// parent's list, a child saga naming the root (a cycle).
func (g *gen) fork(b *strings.Builder, line func(string, ...any), i int, kind string, writes []string) {
	id := g.ids[i]
	g.forks++
	g.depth++
	defer func() { g.depth-- }()
	switch kind {
	case "parallel":
		n := 1 + g.r.IntN(4)
		switch {
		case g.wild && g.chance(0.05):
			n = 21
		case g.chance(0.03):
			n = 20
		}
		mistake := ""
		if n >= 2 {
			mistake = g.take("cross_branch_read", "next_out")
		} else {
			mistake = g.take("next_out")
		}
		line("parallel:")
		for j := range n {
			extra := ""
			switch {
			case mistake == "cross_branch_read" && j == 0:
				extra = fmt.Sprintf("  - id: %s_xw\n    set: {%s_xv: 1}\n", id, id)
			case mistake == "cross_branch_read" && j == 1:
				extra = fmt.Sprintf("  - id: %s_xr\n    set: {%s_xr: \"${vars.%s_xv}\"}\n", id, id, id)
			case mistake == "next_out" && j == n-1:
				extra = fmt.Sprintf("  - id: %s_nx\n    set: {%s_nx: 1}\n    next: %s\n", id, id, g.ids[0])
			}
			b.WriteString("      - steps:\n")
			b.WriteString(indent(g.list(fmt.Sprintf("%sb%d", id, j), g.known[i], extra), 6))
		}
	case "foreach":
		switch x := g.r.IntN(10); {
		case x < 4:
			line(`foreach: "${%s}"`, g.in("items"))
		case x < 5:
			line(`foreach: "${[]}"`)
		case x < 8:
			items := make([]string, 1+g.r.IntN(6))
			for k := range items {
				items[k] = fmt.Sprint(k)
			}
			line(`foreach: "${[%s]}"`, strings.Join(items, ", "))
		case x < 9 && g.chance(0.2):
			// One past the limit: the step fails as it runs.
			line(`foreach: "${%s}"`, bigList(10_001))
		default:
			line(`foreach: %s`, g.render("${"+g.expr(i)+"}"))
		}
		as := "item"
		if g.chance(0.4) {
			as = fmt.Sprintf("it%d", g.depth)
			line("as: %s", as)
		}
		switch {
		case g.wild && g.chance(0.05):
			line("concurrency: %d", g.intOf(0, 101))
		case g.chance(0.05):
			line("concurrency: 100")
		case g.chance(0.5):
			line("concurrency: %d", 1+g.r.IntN(4))
		}
		extra := ""
		if g.take("next_out") != "" {
			extra = fmt.Sprintf("  - id: %s_nx\n    set: {%s_nx: 1}\n    next: %s\n", id, id, g.ids[0])
		}
		scope := g.scope
		g.scope = append(slices.Clone(scope), as, "index")
		line("steps:")
		b.WriteString(indent(g.list(id+"e", g.known[i], extra), 4))
		g.scope = scope
	case "child":
		file := fmt.Sprintf("child%d.yaml", len(g.files))
		g.files[file] = nil // the name is taken
		line("saga: %s", file)
		declare := g.chance(0.3)
		field := func(name, literal string) string {
			if g.declared != nil && g.declared[name] == "" && (g.calm || g.chance(0.8)) {
				return g.render(literal)
			}
			return g.render("${input." + name + "}")
		}
		switch {
		case declare && (g.calm || g.chance(0.5)):
			line("with: {n: %s}", field("n", "3"))
		case g.chance(0.8):
			line("with: {n: %s, s: %s, items: %s}", field("n", "3"), field("s", "go"), g.pick(field("items", "${[1, 2]}"), g.render("${[1, 2]}")))
		}
		extra := ""
		switch g.take("dup_child_id", "child_cycle") {
		case "dup_child_id":
			extra = fmt.Sprintf("  - id: %s\n    set: {dup: 1}\n", g.ids[0])
		case "child_cycle":
			extra = fmt.Sprintf("  - id: %s_cy\n    saga: prop.yaml\n", id)
		}
		scope, declared := g.scope, g.declared
		g.scope, g.declared = nil, nil // a child saga sees only its own input
		if declare {
			g.declared = map[string]string{"n": "int"}
		}
		var src strings.Builder
		fmt.Fprintf(&src, "saga: %s\n", strings.TrimSuffix(file, ".yaml"))
		if declare {
			src.WriteString("input: {n: int}\n") // with may give more: refused
		}
		src.WriteString("steps:\n")
		src.WriteString(g.list(id+"c", nil, extra))
		g.scope, g.declared = scope, declared
		g.files[file] = []byte(src.String())
	}
	if len(writes) > 0 {
		line("out: %s", writes[0])
	}
	g.catches(line, i)
	g.next(line, i, 0.1)
}

// next writes, with chance p, a next to a target of step i, if it has one.
func (g *gen) next(line func(string, ...any), i int, p float64) {
	if !g.chance(p) {
		return
	}
	if t := g.target(i, false); t != "" {
		line("next: %s", t)
	}
}

// calmValue is a value template of the calm cases: literals, reads of
// known vars and input fields, small maps; odd only at run time.
func (g *gen) calmValue(i, depth int) any {
	switch g.r.IntN(6) {
	case 0:
		return g.pickAny(int64(g.r.IntN(100)), "lit")
	case 1, 2, 3:
		return "${" + g.expr(i) + "}"
	case 4:
		if depth < 2 {
			return map[string]any{"k": g.value(i, depth+1), "n": "${input.n}"}
		}
	}
	return nil
}

// in reads the input's field name where the definition may read it (it
// declares no input, or declares the field), else a literal of its kind.
func (g *gen) in(name string) string {
	if g.declared == nil || g.declared[name] != "" {
		return "input." + name
	}
	switch name {
	case "n":
		return "3"
	case "s":
		return "'go'"
	case "flag":
		return "true"
	case "items":
		return "[1, 2]"
	}
	return "null"
}

// calmExpr is a CEL expression of the calm cases: v reads a known var.
func (g *gen) calmExpr(v func() string) string {
	switch g.r.IntN(8) {
	case 0, 1, 2:
		return v()
	case 3:
		if x := v(); strings.HasPrefix(x, "vars.") {
			return "has(" + x + ") ? " + x + " : 0"
		}
	case 4:
		return g.pick(g.in("n"), g.in("s"), "saga.id", "saga.attempt")
	case 5:
		return g.pick(g.in("n")+" / 0", g.in("items")+"[99]", g.in("n")+" + 1") // may fail as it runs
	}
	return g.pick("1", "'text'", "true", "timestamp('2024-01-01T00:00:00+02:00')")
}

// bigList is a CEL list literal of n numbers.
func bigList(n int) string {
	var b strings.Builder
	b.WriteByte('[')
	for k := range n {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, k%10)
	}
	b.WriteByte(']')
	return b.String()
}
