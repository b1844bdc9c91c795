package sagactl_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// local down signals only a local loop that is running: a state file left
// behind whose pid now belongs to another process is cleaned up, and that
// process is left alone (a SIGTERM could reach any process, pid 1 too).
func TestLocalDownSignalsOnlyARunningLocalLoop(t *testing.T) {
	t.Chdir(t.TempDir())
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Skipf("sleep: %v", err)
	}
	defer other.Process.Kill()
	if err := os.MkdirAll(filepath.Dir(sagactl.LocalStateFile), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"pid": other.Process.Pid})
	if err := os.WriteFile(sagactl.LocalStateFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runSagactl(t, nil, "local", "down")
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("local down signalled pid %d, which is no local loop: %v", other.Process.Pid, err)
	}
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "was not running") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want the stale state cleaned up", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(sagactl.LocalStateFile); !os.IsNotExist(err) {
		t.Fatalf("state file still there: %v", err)
	}
}

// The local loop's state file "is trusted only while its lock is held"
// (local.go, localLockFile), by local down and by --local alike: with a
// state file a crashed `sagactl local` left behind, signal, callback and
// status --local refuse with "is `sagactl local` running in this
// directory?", rather than talk to whatever listens at its endpoints now,
// or give the SDK's "connection refused" retries when nothing does.
func TestLocalFlagDistrustsAStaleStateFile(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(filepath.Dir(sagactl.LocalStateFile), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"pid": 999999, "dynamodb_endpoint": "http://127.0.0.1:1", "sqs_endpoint": "http://127.0.0.1:1", "table": "t",
		"advance_queue_url": "http://127.0.0.1:1/q/a", "compensate_queue_url": "http://127.0.0.1:1/q/c"})
	if err := os.WriteFile(sagactl.LocalStateFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"signal", "s-1", "approved", "--local"}, {"status", "s-1", "--local"}} {
		r := runSagactl(t, nil, args...)
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "sagactl local") || strings.Contains(r.stderr, "connection refused") {
			t.Errorf("%v with a stale state file: exit %d\n%s", args, r.code, r.stderr)
		}
	}
}
