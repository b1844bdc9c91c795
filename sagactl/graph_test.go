package sagactl_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// TestGraphNodeIDsAreDistinct: every step and every compensation gets a
// node of its own, whatever its id looks like once made safe for Mermaid.
func TestGraphNodeIDsAreDistinct(t *testing.T) {
	r := runSagactl(t, nil, "graph", "testdata/collide.yaml")
	if r.code != sagactl.ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	decl := regexp.MustCompile(`^    ([A-Za-z0-9_]+)(\[/|\[|\{\{|\{|\(\[)"([^"<]*)`)
	labels := map[string]string{} // node id -> label
	seen := map[string]string{}   // label -> node id
	for _, line := range strings.Split(r.stdout, "\n") {
		m := decl.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		id, label := m[1], m[3]
		if prev, ok := labels[id]; ok {
			t.Errorf("node %s stands for both %q and %q", id, prev, label)
		}
		labels[id] = label
		seen[label] = id
	}
	for _, want := range []string{"a.b", "a_b", "a-b", "a", "a_undo", "undo a"} {
		if _, ok := seen[want]; !ok {
			t.Errorf("no node for %q", want)
		}
	}
	// Edges name the nodes of the right steps: a.b -> a_b -> a-b -> a -> a_undo.
	for _, e := range [][2]string{{"a.b", "a_b"}, {"a_b", "a-b"}, {"a-b", "a"}, {"a", "a_undo"}} {
		edge := "    " + seen[e[0]] + " --> " + seen[e[1]] + "\n"
		if !strings.Contains(r.stdout, edge) {
			t.Errorf("no edge %s -> %s (%q)", e[0], e[1], edge)
		}
	}
	if edge := "    " + seen["a"] + " -.->|compensate| " + seen["undo a"] + "\n"; !strings.Contains(r.stdout, edge) {
		t.Errorf("no compensate edge from a to its undo (%q)", edge)
	}
	if t.Failed() {
		t.Log(r.stdout)
	}
}
