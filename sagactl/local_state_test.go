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
