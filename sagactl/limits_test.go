package sagactl_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

// padTo writes prefix padded with spaces to exactly n bytes.
func padTo(t *testing.T, name, prefix string, n int) string {
	t.Helper()
	if len(prefix) > n {
		t.Fatalf("prefix of %d bytes is over %d", len(prefix), n)
	}
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(prefix+strings.Repeat(" ", n-len(prefix))), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestFilesAreReadWithinALimit: no file sagactl reads (a definition, an
// @FILE input) is read into memory past its limit, so /dev/zero is refused
// with a message naming it, instead of running out of memory.
func TestFilesAreReadWithinALimit(t *testing.T) {
	def, err := os.ReadFile(orderFile)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := os.ReadFile("../examples/order/testdata/ok.json")
	if err != nil {
		t.Fatal(err)
	}
	defAt := padTo(t, "at.yaml", string(def), lang.MaxDefinitionBytes)
	defOver := padTo(t, "over.yaml", string(def), lang.MaxDefinitionBytes+1)
	inAt := padTo(t, "at.json", string(ok), sagactl.MaxInputFileBytes)
	inOver := padTo(t, "over.json", string(ok), sagactl.MaxInputFileBytes+1)
	defLimit := fmt.Sprintf("over the limit of %d bytes for a definition", lang.MaxDefinitionBytes)
	inLimit := fmt.Sprintf("over the limit of %d bytes for an input", sagactl.MaxInputFileBytes)
	// run keeps large values as objects in memory: its inputs may be larger.
	runInLimit := fmt.Sprintf("over the limit of %d bytes for an input", sagactl.MaxOffloadInputFileBytes)

	for _, args := range [][]string{
		{"validate", defAt},
		{"plan", defAt, "--fail", "ship", "--input", "@" + inAt},
	} {
		if r := runSagactl(t, nil, args...); r.code != sagactl.ExitOK {
			t.Errorf("%v: a file at its limit is refused: exit %d\n%s", args, r.code, r.stderr)
		}
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"validate", "/dev/zero"}, "/dev/zero: " + defLimit},
		{[]string{"validate", defOver}, defOver + ": " + defLimit},
		{[]string{"graph", "/dev/zero"}, "/dev/zero: " + defLimit},
		{[]string{"run", defOver, "--input", "{}"}, defOver + ": " + defLimit},
		{[]string{"run", orderFile, "--input", "@/dev/zero"}, "--input: /dev/zero: " + runInLimit},
		{[]string{"plan", orderFile, "--fail", "ship", "--input", "@" + inOver}, "--input: " + inOver + ": " + inLimit},
		{[]string{"cost", orderFile, "--input", "@/dev/zero"}, "--input: /dev/zero: " + inLimit},
		{[]string{"plan", orderFile, "--fail", "ship", "--input", string(ok) + strings.Repeat(" ", sagactl.MaxInputFileBytes)}, " bytes, " + inLimit},
		{[]string{"run", orderFile, "--input", "@/dev/zero", "--dynamodb-endpoint", "http://127.0.0.1:1", "--sqs-endpoint", "http://127.0.0.1:1"}, "--input: /dev/zero: " + inLimit},
	}
	for _, tt := range tests {
		name := strings.Join(tt.args, " ")
		t.Run(name[:min(len(name), 80)], func(t *testing.T) {
			r := runSagactl(t, nil, tt.args...)
			if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q, want %q", r.code, r.stderr, tt.want)
			}
		})
	}
}

// TestMissingDefinitionSaysItOnce: the file is named once, with why it
// cannot be read.
func TestMissingDefinitionSaysItOnce(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", "missing.yaml"}, "sagactl: definition missing.yaml: no such file or directory\n"},
		{[]string{"run", "missing.yaml", "--input", "{}"}, "sagactl: definition missing.yaml: no such file or directory\n"},
		{[]string{"validate", dir}, "sagactl: definition " + dir + ": is a directory\n"},
		{[]string{"run", orderFile, "--input", "@nowhere.json"}, "sagactl: --input: nowhere.json: no such file or directory\n"},
	} {
		r := runSagactl(t, nil, tt.args...)
		if r.code != sagactl.ExitUsage || r.stderr != tt.want {
			t.Errorf("%v: exit %d, stderr %q, want %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
}

// TestInputThatIsNotAnObjectSaysItsType: the error names what the input
// is, never echoes it (it may be a card number).
func TestInputThatIsNotAnObjectSaysItsType(t *testing.T) {
	for in, want := range map[string]string{
		`"4111111111111111"`: "got a string",
		`4111111111111111`:   "got a number",
		`[4111111111111111]`: "got a list",
		`true`:               "got a bool",
		`null`:               "got null",
	} {
		r := runSagactl(t, nil, "run", orderFile, "--input", in)
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "--input: must be a JSON object, "+want) || strings.Contains(r.stderr, "4111") {
			t.Errorf("--input %s: exit %d, stderr %q", in, r.code, r.stderr)
		}
	}
}

// A named pipe nobody writes to, or whose writer stalls, ends in a clear
// error rather than blocking forever (validate, run --input @FIFO,
// validate --template FIFO).
func TestPipesThatNeverDeliverEnd(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "never")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, args := range [][]string{
		{"validate", fifo},
		{"run", orderFile, "--input", "@" + fifo},
		{"validate", "--template", fifo, orderFile},
		{"local", "--template", fifo},
	} {
		done := make(chan result, 1)
		go func() { done <- runSagactl(t, nil, args...) }()
		select {
		case r := <-done:
			if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, fifo) {
				t.Errorf("%v: exit %d, stderr %q; want a usage error naming the pipe", args, r.code, r.stderr)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: still reading a pipe nobody writes to after 10 s", args)
		}
	}
}

// A saga id that cannot name a saga is refused before any store is asked,
// and not echoed (it may hold terminal escapes).
func TestSagaIDsAreCheckedBeforeUse(t *testing.T) {
	for _, cmd := range []string{"status", "cancel", "resume"} {
		r := runSagactl(t, nil, cmd, "a b\x1b[31m", "--table", "t", "--advance-queue-url", "http://127.0.0.1:1/a", "--compensate-queue-url", "http://127.0.0.1:1/c")
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "not a saga id") || strings.Contains(r.stderr, "\x1b") {
			t.Errorf("%s: exit %d, stderr %q; want the id refused, not echoed", cmd, r.code, r.stderr)
		}
	}
}

// After --, every argument is a name, not a flag: only the first was.
func TestDoubleDashEndsFlags(t *testing.T) {
	r := runSagactl(t, nil, "validate", "--", "-a.yaml", "-b.yaml")
	if strings.Contains(r.stderr, "flag provided but not defined") || !strings.Contains(r.stderr, "-a.yaml") || !strings.Contains(r.stderr, "-b.yaml") {
		t.Fatalf("stderr %q: want both names taken as files", r.stderr)
	}
}
