package sim

import (
	"fmt"
	"strings"
	"testing/fstest"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// forkGen writes one generated definition with forks (parallel, foreach,
// saga children), and the child definitions its saga steps name. Step ids
// are unique across the bundle: every step gets the next number.
type forkGen struct {
	w     *world
	k     int               // the definition's number
	next  int               // the next step number
	files map[string]string // child file -> source
	sb    strings.Builder
}

func (g *forkGen) id(prefix string) string {
	g.next++
	return fmt.Sprintf("%s%d", prefix, g.next)
}

func (g *forkGen) line(indent int, format string, args ...any) {
	g.sb.WriteString(strings.Repeat("  ", indent))
	fmt.Fprintf(&g.sb, format, args...)
	g.sb.WriteByte('\n')
}

// action writes an action step, compensable seven times in ten, with
// retries and sometimes a short pause before it (so children overlap in
// time and the deadline can pass while they run).
func (g *forkGen) action(indent int) {
	r := g.w.rng
	id := g.id("a")
	g.line(indent, "- id: %s", id)
	g.line(indent+1, "action: svc.%s", id)
	g.line(indent+1, "out: o%s", id)
	g.line(indent+1, "retry: {attempts: %d, backoff: 1s, max_backoff: 4s}", 1+r.IntN(3))
	if r.IntN(10) < 7 {
		g.line(indent+1, "compensate: {action: svc.%s_undo, with: {ref: \"${vars.o%s}\"}, retry: {attempts: %d, backoff: 1s, max_backoff: 8s}}", id, id, 2+r.IntN(3))
	}
}

// pause writes a wait step of a few seconds to a few minutes.
func (g *forkGen) pause(indent int) {
	g.line(indent, "- id: %s", g.id("p"))
	g.line(indent+1, "wait: {for: %ds}", 1+g.w.rng.IntN(240))
}

// list writes the steps of a branch, a foreach body or a child saga: one
// to three actions, sometimes a pause, and, above depth 2, sometimes a
// nested fork.
func (g *forkGen) list(indent, depth int) {
	r := g.w.rng
	n := 1 + r.IntN(3)
	for i := range n {
		switch p := r.Float64(); {
		case p < 0.2 && depth < 2 && i > 0:
			g.fork(indent, depth+1, false)
		case p < 0.35:
			g.pause(indent)
			g.action(indent)
		default:
			g.action(indent)
		}
	}
}

// fork writes a parallel (2-4 branches), a foreach (over input.items,
// 0-30 elements, concurrency 1-10) or a saga step (a child definition of
// its own) at the given depth; caught (to the step after it) when catch.
func (g *forkGen) fork(indent, depth int, top bool) {
	r := g.w.rng
	id := g.id("f")
	g.line(indent, "- id: %s", id)
	switch q := r.IntN(3); {
	case q == 0:
		g.line(indent+1, "parallel:")
		for range 2 + r.IntN(3) {
			g.line(indent+2, "- steps:")
			g.list(indent+3, depth)
		}
	case q == 1:
		g.line(indent+1, "foreach: \"${input.items}\"")
		g.line(indent+1, "as: it%d", depth)
		g.line(indent+1, "concurrency: %d", 1+r.IntN(10))
		g.line(indent+1, "steps:")
		g.list(indent+2, depth)
	default:
		file := fmt.Sprintf("child%d_%d.yaml", g.k, len(g.files))
		g.line(indent+1, "saga: %s", file)
		g.line(indent+1, "with: {n: \"${input.n}\", items: \"${input.items}\"}")
		g.child(file, depth)
	}
	g.line(indent+1, "out: o%s", id)
	if top && r.IntN(4) == 0 {
		g.line(indent+1, "catch: [{errors: [\"*\"], next: {{NEXT}}}]")
	}
}

// child writes a child definition (a child saga counts one deeper than
// its saga step): actions, and below depth 2 sometimes a fork of its own;
// a third have a deadline of their own, a quarter hold on failure.
func (g *forkGen) child(file string, depth int) {
	outer := g.sb
	g.sb = strings.Builder{}
	g.files[file] = "" // reserve the name
	g.line(0, "saga: %s", strings.TrimSuffix(file, ".yaml"))
	g.line(0, "input: {n: int, items: list}")
	var deadline time.Duration
	if g.w.rng.IntN(3) == 0 {
		deadline = time.Duration(60+g.w.rng.IntN(600)) * time.Second
		g.line(0, "timeout: %ds", int(deadline/time.Second))
	}
	g.sb.WriteString(g.w.genHold(deadline)) // a held child keeps its parent waiting
	g.line(0, "steps:")
	g.list(1, depth+1)
	g.line(1, "- id: %s", g.id("d"))
	g.line(2, "succeed: {output: {n: \"${input.n}\"}}")
	g.files[file] = g.sb.String()
	g.sb = outer
}

// genForkDefinition writes definition k with forks: an action, one or two
// forks (a quarter caught), an action between or after them, and a
// succeed; a third have a deadline short enough to pass while children
// run. It returns the files of its bundle; the root is fork<k>.yaml.
func (w *world) genForkDefinition(k int) fstest.MapFS {
	r := w.rng
	g := &forkGen{w: w, k: k, files: map[string]string{}}
	g.line(0, "saga: fork%d", k)
	g.line(0, "input: {n: int, items: list}")
	if r.IntN(3) == 0 {
		g.line(0, "timeout: %ds", []int{90, 300, 1200}[r.IntN(3)])
	}
	g.line(0, "steps:")
	g.action(1)
	forks := 1 + r.IntN(2)
	for i := range forks {
		g.fork(1, 1, true)
		if i == 0 || r.IntN(2) == 0 {
			g.action(1)
		}
	}
	done := g.id("d")
	g.line(1, "- id: %s", done)
	g.line(2, "succeed: {output: {n: \"${input.n}\"}}")
	fsys := fstest.MapFS{}
	for name, src := range g.files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	// A caught fork goes on at the step after it: the first step line
	// after the catch.
	lines := strings.Split(g.sb.String(), "\n")
	for i, l := range lines {
		if !strings.Contains(l, "{{NEXT}}") {
			continue
		}
		for _, m := range lines[i+1:] {
			if strings.HasPrefix(m, "  - id: ") {
				lines[i] = strings.ReplaceAll(l, "{{NEXT}}", strings.TrimPrefix(m, "  - id: "))
				break
			}
		}
	}
	fsys[fmt.Sprintf("fork%d.yaml", k)] = &fstest.MapFile{Data: []byte(strings.Join(lines, "\n"))}
	return fsys
}

// genForkPlans compiles count generated definitions with forks (drawn
// again when validation refuses one, counted), and records every plan a
// child may run by its hash.
func (w *world) genForkPlans(count int) ([]*saga.Plan, error) {
	var out []*saga.Plan
	for k := 0; len(out) < count; k++ {
		if k > 20*count+20 {
			return nil, fmt.Errorf("seed %d: validation refused %d generated definitions with forks", w.cfg.Seed, w.report.Refused)
		}
		fsys := w.genForkDefinition(len(out))
		p, err := saga.CompileFile(fsys, fmt.Sprintf("fork%d.yaml", len(out)), saga.Options{MaxVisits: genMaxVisits})
		if err != nil {
			if w.report.Refused == 0 {
				w.report.RefusedExample = fmt.Sprintf("%v\n%s", err, fsys[fmt.Sprintf("fork%d.yaml", len(out))].Data)
			}
			w.report.Refused++
			continue
		}
		w.addPlan(p)
		out = append(out, p)
	}
	return out, nil
}

// addPlan records p and the plans of its child sagas by hash: a child
// run's plan is found by its state's DefinitionHash.
func (w *world) addPlan(p *saga.Plan) {
	if w.plans == nil {
		w.plans = map[string]*saga.Plan{}
	}
	if w.plans[p.Hash()] != nil {
		return
	}
	w.plans[p.Hash()] = p
	for _, s := range p.Steps() {
		if c, ok := p.Child(s.ID); ok {
			w.addPlan(c)
		}
	}
}
