package layout_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fromExample marks a README snippet cut from a runnable example.
var fromExample = regexp.MustCompile(`^// from (Example\w*) in (\S+_test\.go)$`)

// TestReadmeSnippetsAreExamples: every Go snippet in the README is cut,
// line for line, from the runnable example its first line names, so what
// the README shows compiles and runs under go test.
func TestReadmeSnippetsAreExamples(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	snippets := 0
	for _, block := range strings.Split(string(readme), "```go\n")[1:] {
		body, _, ok := strings.Cut(block, "```")
		if !ok {
			t.Fatal("README: a Go snippet that never ends")
		}
		lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
		m := fromExample.FindStringSubmatch(lines[0])
		if m == nil {
			t.Errorf("README snippet %q does not say which example it is from (// from ExampleX in path/example_test.go)", lines[0])
			continue
		}
		snippets++
		src, err := os.ReadFile(filepath.Join("../..", m[2]))
		if err != nil {
			t.Errorf("README snippet from %s: %v", m[2], err)
			continue
		}
		fn := exampleBody(string(src), m[1])
		if fn == nil {
			t.Errorf("README snippet: %s has no func %s", m[2], m[1])
			continue
		}
		if !containsRun(fn, []string{"// Output:"}) {
			t.Errorf("README snippet from %s in %s: the example has no // Output: block, so go test compiles it but does not run it", m[1], m[2])
		}
		if !containsRun(fn, trimmed(lines[1:])) {
			t.Errorf("README snippet from %s in %s is not a run of its lines: copy it again from the example", m[1], m[2])
		}
	}
	if snippets == 0 {
		t.Fatal("README has no Go snippet from an example")
	}
}

// exampleBody returns the trimmed lines of func name in src.
func exampleBody(src, name string) []string {
	_, rest, ok := strings.Cut(src, "\nfunc "+name+"() {\n")
	if !ok {
		return nil
	}
	body, _, _ := strings.Cut(rest, "\n}\n")
	return trimmed(strings.Split(body, "\n"))
}

func trimmed(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimSpace(l)
	}
	return out
}

// containsRun reports whether want appears in have as consecutive lines.
func containsRun(have, want []string) bool {
	for i := 0; i+len(want) <= len(have); i++ {
		match := true
		for j := range want {
			if have[i+j] != want[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
