package sagactl_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of sagactl check under testdata/check")

const shopFile = "testdata/check/shop.yaml"

// golden compares got with the file, or rewrites it under -update.
func golden(t *testing.T, file, got string) {
	t.Helper()
	if *updateGolden {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (go test -run %s -update rewrites it):\n%s", file, t.Name(), got)
	}
}

// check prints, file by file, what each failing step would undo and the
// findings with file:line, step and field; the same every time.
func TestCheckPrintsStacksAndFindings(t *testing.T) {
	t.Parallel()
	r := runSagactl(t, nil, "check", shopFile)
	if r.code != sagactl.ExitOK || r.stderr != "" {
		t.Fatalf("exit %d, want 0 without --require-compensation\n%s", r.code, r.stderr)
	}
	golden(t, "testdata/check/shop.txt", r.stdout)
	if again := runSagactl(t, nil, "check", shopFile); again.stdout != r.stdout {
		t.Fatal("a second check printed otherwise")
	}
}

// check --json prints the same in the documented schema, every field
// there.
func TestCheckPrintsJSON(t *testing.T) {
	t.Parallel()
	r := runSagactl(t, nil, "check", "--json", shopFile)
	if r.code != sagactl.ExitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	golden(t, "testdata/check/shop.json", r.stdout)
	var doc struct {
		Files []struct {
			File     string
			Findings []struct{ Kind, Step, Field string }
		}
		Findings int
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Findings != 3 || len(doc.Files) != 2 || doc.Files[1].File != "testdata/check/pay.yaml" {
		t.Fatalf("decoded %+v (%v): want 3 findings in 2 files, the child second", doc, err)
	}
}

// --require-compensation makes a finding fail the command (exit 6); an
// invalid definition exits 1 as validate does, with its problems, and
// wins over findings in the files beside it.
func TestCheckExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"check", shopFile}, sagactl.ExitOK, ""},
		{[]string{"check", "--require-compensation", shopFile}, sagactl.ExitFindings, "3 finding(s) with --require-compensation"},
		{[]string{"check", "--require-compensation", "testdata/check/pay.yaml"}, sagactl.ExitOK, ""},
		{[]string{"check", "testdata/check/broken.yaml"}, sagactl.ExitUsage, "broken.yaml:5:48: step a: compensate.with.id: reads vars.nope"},
		{[]string{"check", "--require-compensation", shopFile, "testdata/check/broken.yaml"}, sagactl.ExitUsage, "1 problem(s)"},
		{[]string{"check", "testdata/check/nosuch.yaml"}, sagactl.ExitUsage, "nosuch.yaml"},
		{[]string{"check"}, sagactl.ExitUsage, "name at least one definition file"},
	} {
		r := runSagactl(t, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("%q: exit %d, want %d with %q in:\n%s", tc.args, r.code, tc.code, tc.stderr, r.stderr)
		}
	}
	if r := runSagactl(t, nil, "check", "--help"); r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "6  --require-compensation: some definition has a finding") {
		t.Errorf("check --help: exit %d, no exit codes:\n%s", r.code, r.stdout)
	}
}

// Every example definition passes the gate: an action added to one
// without compensate (or compensate: none) fails this test.
func TestCheckPassesEveryExample(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../examples/*/*.yaml")
	if len(files) < 4 {
		t.Fatalf("found %d example definitions", len(files))
	}
	r := runSagactl(t, nil, append([]string{"check", "--require-compensation"}, files...)...)
	if r.code != sagactl.ExitOK {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}
