package sagactl_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// sagactl reads a child saga from the definition's directory or below it:
// a symbolic link that leads out is refused at the step naming it, with
// the file and line, and the definition is invalid.
func TestChildSagaSymlinkOutOfDirectory(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	dir := filepath.Join(top, "sagas")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		filepath.Join(top, "outside.yaml"): "saga: secret\nsteps:\n  - {id: leak, action: w}\n",
		filepath.Join(dir, "main.yaml"):    "saga: m\nsteps:\n  - {id: a, action: w}\n  - {id: kid, saga: up.yaml}\n",
		filepath.Join(dir, "inside.yaml"):  "saga: m\nsteps:\n  - {id: kid, saga: in.yaml}\n",
		filepath.Join(dir, "c.yaml"):       "saga: c\nsteps:\n  - {id: b, action: w}\n",
	} {
		if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for target, name := range map[string]string{"../outside.yaml": "up.yaml", "c.yaml": "in.yaml"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	main := filepath.Join(dir, "main.yaml")
	r := runSagactl(t, nil, "validate", main)
	if r.code != sagactl.ExitUsage {
		t.Fatalf("exit %d, want %d; stdout:\n%s", r.code, sagactl.ExitUsage, r.stdout)
	}
	for _, want := range []string{main + ":4:", "step kid: saga: ", "up.yaml -> ../outside.yaml", "out of the definition's directory"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if r := runSagactl(t, nil, "validate", filepath.Join(dir, "inside.yaml")); r.code != sagactl.ExitOK {
		t.Errorf("a link inside the directory: exit %d: %s", r.code, r.stderr)
	}
}
