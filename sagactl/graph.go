package sagactl

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

func runGraph(c *Config, args []string) int {
	fs := flag.NewFlagSet("graph", flag.ContinueOnError)
	files, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	plan, _, ok := c.oneDefinition("graph", files)
	if !ok {
		return ExitUsage
	}
	writeMermaid(c.Stdout, plan.Definition(), func(s *lang.Step) *lang.Definition {
		if child, ok := plan.Child(s.ID); ok {
			return child.Definition()
		}
		return nil
	})
	return ExitOK
}

// mermaidText escapes a label for a quoted Mermaid node or edge label.
func mermaidText(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;", "\n", " ")
	return r.Replace(s)
}

// writeMermaid draws the definition: solid edges for the forward path,
// labelled edges for switch cases and catches, dotted edges to each step's
// compensation, and the terminal outcomes. A parallel step's branches, a
// foreach step's body and a saga step's child are subgraphs, whose ends
// lead to the fork's join; child gives a saga step's child definition (nil
// when it has none to draw).
//
// Node ids come from the steps' indexes (s0, s1, ...; u0 for the undo of
// step 0; the saga's own steps first, then nested ones in source order),
// never from their ids: ids such as a.b, a_b and a-b, or a step a_undo
// beside the undo of a, would otherwise name one node. The labels carry
// the step ids.
func writeMermaid(w io.Writer, def *lang.Definition, child func(*lang.Step) *lang.Definition) {
	m := &mermaid{w: w, child: child}
	fmt.Fprintf(w, "flowchart TD\n")
	ids := m.number(def.Steps, "")
	fmt.Fprintf(w, "    start((start)) --> %s\n", ids[def.Steps[0]])
	fmt.Fprintf(w, "    succeeded((succeeded))\n")
	fmt.Fprintf(w, "    compensate[[compensate: undo completed steps, newest first]]\n")
	m.list(def.Steps, ids, "succeeded", "    ")
}

// mermaid draws one definition and the children of its saga steps.
type mermaid struct {
	w        io.Writer
	child    func(*lang.Step) *lang.Definition
	children int // child definitions drawn so far: their node ids start c1, c2, ...
}

// number gives each step of steps, and of the lists nested in them, its
// node id: prefix, then s and its index in that order.
func (m *mermaid) number(steps []*lang.Step, prefix string) map[*lang.Step]string {
	ids := map[*lang.Step]string{}
	var all []*lang.Step
	var walk func([]*lang.Step)
	walk = func(list []*lang.Step) {
		for _, s := range list {
			for _, b := range s.Parallel {
				all = append(all, b.Steps...)
			}
			all = append(all, s.Steps...)
		}
		for _, s := range list {
			for _, b := range s.Parallel {
				walk(b.Steps)
			}
			walk(s.Steps)
		}
	}
	all = append(all, steps...)
	walk(steps)
	for i, s := range all {
		ids[s] = fmt.Sprintf("%ss%d", prefix, i)
	}
	return ids
}

// list draws a list of steps; exit is the node its end leads to.
func (m *mermaid) list(steps []*lang.Step, ids map[*lang.Step]string, exit, indent string) {
	w := m.w
	byID := map[string]string{}
	for _, s := range steps {
		byID[s.ID] = ids[s]
	}
	nodeID := func(id string) string {
		if n, ok := byID[id]; ok {
			return n
		}
		return "unknown" // a compiled plan has no such target
	}
	next := func(i int, s *lang.Step) string {
		if s.Next != "" {
			return nodeID(s.Next)
		}
		if i+1 < len(steps) {
			return ids[steps[i+1]]
		}
		return exit
	}
	for i, s := range steps {
		id := ids[s]
		switch s.Kind {
		case lang.KindAction:
			what := mermaidText(s.Action)
			if s.Callback != nil {
				what += "<br/>then waits for its callback, " + lang.FormatDuration(callbackTimeout(s))
			}
			fmt.Fprintf(w, "%s%s[\"%s<br/>%s\"]\n", indent, id, mermaidText(s.ID), what)
			fmt.Fprintf(w, "%s%s --> %s\n", indent, id, next(i, s))
			fmt.Fprintf(w, "%s%s -->|fails| compensate\n", indent, id)
		case lang.KindSet:
			names := make([]string, len(s.Set))
			for j, a := range s.Set {
				names[j] = a.Name
			}
			fmt.Fprintf(w, "%s%s[\"%s<br/>set %s\"]\n", indent, id, mermaidText(s.ID), mermaidText(strings.Join(names, ", ")))
			fmt.Fprintf(w, "%s%s --> %s\n", indent, id, next(i, s))
		case lang.KindSwitch:
			fmt.Fprintf(w, "%s%s{\"%s\"}\n", indent, id, mermaidText(s.ID))
			hasDefault := false
			for _, cs := range s.Switch {
				if cs.Default {
					hasDefault = true
					fmt.Fprintf(w, "%s%s -->|default| %s\n", indent, id, nodeID(cs.Next))
				} else {
					fmt.Fprintf(w, "%s%s -->|\"%s\"| %s\n", indent, id, mermaidText(cs.If), nodeID(cs.Next))
				}
			}
			if !hasDefault {
				fmt.Fprintf(w, "%s%s -->|otherwise| %s\n", indent, id, next(i, s))
			}
		case lang.KindAssert:
			fmt.Fprintf(w, "%s%s{{\"%s<br/>assert %s\"}}\n", indent, id, mermaidText(s.ID), mermaidText(s.Assert.If))
			fmt.Fprintf(w, "%s%s --> %s\n", indent, id, next(i, s))
			fmt.Fprintf(w, "%s%s -->|false| compensate\n", indent, id)
		case lang.KindFail:
			fmt.Fprintf(w, "%s%s[\"%s<br/>fail %s\"]\n", indent, id, mermaidText(s.ID), mermaidText(s.Fail.Error))
			fmt.Fprintf(w, "%s%s --> compensate\n", indent, id)
		case lang.KindSucceed:
			fmt.Fprintf(w, "%s%s([\"%s<br/>succeed\"])\n", indent, id, mermaidText(s.ID))
			fmt.Fprintf(w, "%s%s --> %s\n", indent, id, exit)
		case lang.KindWait:
			what := "wait " + lang.FormatDuration(s.Wait.For)
			if s.Wait.Until != "" {
				what = "wait until " + s.Wait.Until
			}
			fmt.Fprintf(w, "%s%s>\"%s<br/>%s\"]\n", indent, id, mermaidText(s.ID), mermaidText(what))
			fmt.Fprintf(w, "%s%s --> %s\n", indent, id, next(i, s))
		case lang.KindAwait:
			what := "await signal " + s.Await.Signal + ", " + lang.FormatDuration(awaitTimeout(s))
			fmt.Fprintf(w, "%s%s>\"%s<br/>%s\"]\n", indent, id, mermaidText(s.ID), mermaidText(what))
			fmt.Fprintf(w, "%s%s --> %s\n", indent, id, next(i, s))
			if !catches(s, lang.ErrorTypeTimeout) {
				fmt.Fprintf(w, "%s%s -->|times out| compensate\n", indent, id)
			}
		case lang.KindParallel, lang.KindForeach, lang.KindSaga:
			m.fork(s, ids, next(i, s), indent)
		}
		for _, ct := range s.Catch {
			fmt.Fprintf(w, "%s%s -->|\"catch %s\"| %s\n", indent, id, mermaidText(strings.Join(ct.Errors, ", ")), nodeID(ct.Next))
		}
		if s.Compensate != nil {
			k := strings.LastIndex(id, "s") // the undo of s3 is u3, of c1s3 c1u3
			undo := id[:k] + "u" + id[k+1:]
			fmt.Fprintf(w, "%s%s[/\"undo %s<br/>%s\"/]\n", indent, undo, mermaidText(s.ID), mermaidText(s.Compensate.Action))
			fmt.Fprintf(w, "%s%s -.->|compensate| %s\n", indent, id, undo)
		}
	}
}

// fork draws a parallel, foreach or saga step: its node, a subgraph for
// each branch, the body or the child, and a join node (id j...) that
// their ends lead to and that goes on to next.
func (m *mermaid) fork(s *lang.Step, ids map[*lang.Step]string, next, indent string) {
	w, id := m.w, ids[s]
	join := "j" + id
	what := ""
	switch s.Kind {
	case lang.KindParallel:
		what = fmt.Sprintf("parallel, %d branches", len(s.Parallel))
	case lang.KindForeach:
		if s.Foreach != nil {
			what = fmt.Sprintf("foreach %s in %s, %d at once", s.Foreach.As, s.Foreach.Items, s.Foreach.Concurrency)
		}
	case lang.KindSaga:
		what = "saga " + s.Saga
	}
	fmt.Fprintf(w, "%s%s[[\"%s<br/>%s\"]]\n", indent, id, mermaidText(s.ID), mermaidText(what))
	fmt.Fprintf(w, "%s%s((\"join %s\"))\n", indent, join, mermaidText(s.ID))
	sub := func(name, label string, steps []*lang.Step, sids map[*lang.Step]string) {
		if len(steps) == 0 {
			return
		}
		fmt.Fprintf(w, "%ssubgraph %s [\"%s\"]\n", indent, name, mermaidText(label))
		m.list(steps, sids, join, indent+"    ")
		fmt.Fprintf(w, "%send\n", indent)
		fmt.Fprintf(w, "%s%s --> %s\n", indent, id, sids[steps[0]])
	}
	switch s.Kind {
	case lang.KindParallel:
		for b, br := range s.Parallel {
			sub(fmt.Sprintf("%sb%d", id, b), fmt.Sprintf("%s: branch %d", s.ID, b+1), br.Steps, ids)
		}
	case lang.KindForeach:
		sub(id+"body", s.ID+": each item", s.Steps, ids)
	case lang.KindSaga:
		var def *lang.Definition
		if m.child != nil {
			def = m.child(s)
		}
		if def != nil && len(def.Steps) > 0 {
			m.children++
			sub(id+"child", fmt.Sprintf("%s: saga %s (%s)", s.ID, def.Name, s.Saga), def.Steps, m.number(def.Steps, fmt.Sprintf("c%d", m.children)))
		}
	}
	fmt.Fprintf(w, "%s%s --> %s\n", indent, join, next)
	fmt.Fprintf(w, "%s%s -->|fails| compensate\n", indent, join)
}

// catches reports whether a catch clause of s takes errType.
func catches(s *lang.Step, errType string) bool {
	for _, ct := range s.Catch {
		for _, e := range ct.Errors {
			if e == errType || e == "*" {
				return true
			}
		}
	}
	return false
}

// callbackTimeout is a callback's timeout, its default when none is written.
func callbackTimeout(s *lang.Step) time.Duration {
	if s.Callback.Timeout == 0 {
		return lang.MaxWait
	}
	return s.Callback.Timeout
}
