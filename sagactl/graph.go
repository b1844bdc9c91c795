package sagactl

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/lang"
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
	writeMermaid(c.Stdout, plan.Definition())
	return ExitOK
}

// mermaidText escapes a label for a quoted Mermaid node or edge label.
func mermaidText(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;", "\n", " ")
	return r.Replace(s)
}

// writeMermaid draws the definition: solid edges for the forward path,
// labelled edges for switch cases and catches, dotted edges to each step's
// compensation, and the terminal outcomes.
//
// Node ids come from the steps' indexes (s0, s1, ...; u0 for the undo of
// step 0), never from their ids: ids such as a.b, a_b and a-b, or a step
// a_undo beside the undo of a, would otherwise name one node. The labels
// carry the step ids.
func writeMermaid(w io.Writer, def *lang.Definition) {
	index := make(map[string]int, len(def.Steps))
	for i, s := range def.Steps {
		index[s.ID] = i
	}
	nodeID := func(id string) string {
		if i, ok := index[id]; ok {
			return fmt.Sprintf("s%d", i)
		}
		return "unknown" // a compiled plan has no such target
	}
	fmt.Fprintf(w, "flowchart TD\n")
	fmt.Fprintf(w, "    start((start)) --> %s\n", nodeID(def.Steps[0].ID))
	fmt.Fprintf(w, "    succeeded((succeeded))\n")
	fmt.Fprintf(w, "    compensate[[compensate: undo completed steps, newest first]]\n")
	next := func(i int, s *lang.Step) string {
		if s.Next != "" {
			return nodeID(s.Next)
		}
		if i+1 < len(def.Steps) {
			return nodeID(def.Steps[i+1].ID)
		}
		return "succeeded"
	}
	for i, s := range def.Steps {
		id := nodeID(s.ID)
		switch s.Kind {
		case lang.KindAction:
			what := mermaidText(s.Action)
			if s.Callback != nil {
				what += "<br/>then waits for its callback, " + lang.FormatDuration(callbackTimeout(s))
			}
			fmt.Fprintf(w, "    %s[\"%s<br/>%s\"]\n", id, mermaidText(s.ID), what)
			fmt.Fprintf(w, "    %s --> %s\n", id, next(i, s))
			fmt.Fprintf(w, "    %s -->|fails| compensate\n", id)
		case lang.KindSet:
			names := make([]string, len(s.Set))
			for j, a := range s.Set {
				names[j] = a.Name
			}
			fmt.Fprintf(w, "    %s[\"%s<br/>set %s\"]\n", id, mermaidText(s.ID), mermaidText(strings.Join(names, ", ")))
			fmt.Fprintf(w, "    %s --> %s\n", id, next(i, s))
		case lang.KindSwitch:
			fmt.Fprintf(w, "    %s{\"%s\"}\n", id, mermaidText(s.ID))
			hasDefault := false
			for _, cs := range s.Switch {
				if cs.Default {
					hasDefault = true
					fmt.Fprintf(w, "    %s -->|default| %s\n", id, nodeID(cs.Next))
				} else {
					fmt.Fprintf(w, "    %s -->|\"%s\"| %s\n", id, mermaidText(cs.If), nodeID(cs.Next))
				}
			}
			if !hasDefault {
				fmt.Fprintf(w, "    %s -->|otherwise| %s\n", id, next(i, s))
			}
		case lang.KindAssert:
			fmt.Fprintf(w, "    %s{{\"%s<br/>assert %s\"}}\n", id, mermaidText(s.ID), mermaidText(s.Assert.If))
			fmt.Fprintf(w, "    %s --> %s\n", id, next(i, s))
			fmt.Fprintf(w, "    %s -->|false| compensate\n", id)
		case lang.KindFail:
			fmt.Fprintf(w, "    %s[\"%s<br/>fail %s\"]\n", id, mermaidText(s.ID), mermaidText(s.Fail.Error))
			fmt.Fprintf(w, "    %s --> compensate\n", id)
		case lang.KindSucceed:
			fmt.Fprintf(w, "    %s([\"%s<br/>succeed\"])\n", id, mermaidText(s.ID))
			fmt.Fprintf(w, "    %s --> succeeded\n", id)
		case lang.KindWait:
			what := "wait " + lang.FormatDuration(s.Wait.For)
			if s.Wait.Until != "" {
				what = "wait until " + s.Wait.Until
			}
			fmt.Fprintf(w, "    %s>\"%s<br/>%s\"]\n", id, mermaidText(s.ID), mermaidText(what))
			fmt.Fprintf(w, "    %s --> %s\n", id, next(i, s))
		case lang.KindAwait:
			what := "await signal " + s.Await.Signal + ", " + lang.FormatDuration(awaitTimeout(s))
			fmt.Fprintf(w, "    %s>\"%s<br/>%s\"]\n", id, mermaidText(s.ID), mermaidText(what))
			fmt.Fprintf(w, "    %s --> %s\n", id, next(i, s))
			if !catches(s, lang.ErrorTypeTimeout) {
				fmt.Fprintf(w, "    %s -->|times out| compensate\n", id)
			}
		}
		for _, ct := range s.Catch {
			fmt.Fprintf(w, "    %s -->|\"catch %s\"| %s\n", id, mermaidText(strings.Join(ct.Errors, ", ")), nodeID(ct.Next))
		}
		if s.Compensate != nil {
			undo := fmt.Sprintf("u%d", i)
			fmt.Fprintf(w, "    %s[/\"undo %s<br/>%s\"/]\n", undo, mermaidText(s.ID), mermaidText(s.Compensate.Action))
			fmt.Fprintf(w, "    %s -.->|compensate| %s\n", id, undo)
		}
	}
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
