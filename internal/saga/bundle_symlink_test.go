package saga_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A child saga is read from the definition's directory or below it, and a
// symbolic link does not take it out: a link that leaves the directory is
// refused, named at the saga step that reads it, and what it points at is
// never bundled. A link that stays inside is followed.
func TestBundleRefusesSymlinkOutOfDirectory(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	dir := filepath.Join(top, "sagas")
	write := func(name, src string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "saga: secret\nsteps:\n  - {id: leak, action: w}\n"
	write(filepath.Join(top, "outside.yaml"), secret)
	write(filepath.Join(top, "elsewhere", "c.yaml"), secret)
	write(filepath.Join(dir, "inner", "c.yaml"), "saga: c\nsteps:\n  - {id: b, action: w}\n")
	link("../outside.yaml", filepath.Join(dir, "up.yaml"))
	link(filepath.Join(top, "outside.yaml"), filepath.Join(dir, "abs.yaml"))
	link("../elsewhere", filepath.Join(dir, "linkdir"))
	link("inner/../../outside.yaml", filepath.Join(dir, "winding.yaml"))
	link("inner/c.yaml", filepath.Join(dir, "in.yaml"))
	link("in.yaml", filepath.Join(dir, "chain.yaml"))
	fsys := os.DirFS(top)

	for _, tc := range []struct{ child, link string }{
		{"up.yaml", "sagas/up.yaml"},
		{"abs.yaml", "sagas/abs.yaml"},
		{"linkdir/c.yaml", "sagas/linkdir"},
		{"winding.yaml", "sagas/winding.yaml"},
	} {
		write(filepath.Join(dir, "main.yaml"), "saga: m\nsteps:\n  - {id: a, action: w}\n  - {id: kid, saga: "+tc.child+"}\n")
		p, err := saga.CompileFile(fsys, "sagas/main.yaml", forks)
		if err == nil {
			t.Errorf("%s: bundled what a link out of the directory points at:\n%s", tc.child, p.Source())
			continue
		}
		msg := err.Error()
		for _, want := range []string{"sagas/main.yaml:4:", "step kid: saga: ", tc.link, "symbolic link", "out of the definition's directory"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q does not say %q", tc.child, msg, want)
			}
		}
		if strings.Contains(msg, "leak") {
			t.Errorf("%s: the linked file was compiled: %s", tc.child, msg)
		}
	}

	// The definition's directory is the root of fsys: a link cannot
	// climb out of it either.
	write(filepath.Join(dir, "main.yaml"), "saga: m\nsteps:\n  - {id: kid, saga: up.yaml}\n")
	if _, err := saga.CompileFile(os.DirFS(dir), "main.yaml", forks); err == nil || !strings.Contains(err.Error(), "main.yaml:3:") || !strings.Contains(err.Error(), "up.yaml -> ../outside.yaml") {
		t.Errorf("a link out of the root of the file system: %v", err)
	}

	for _, child := range []string{"in.yaml", "chain.yaml"} {
		write(filepath.Join(dir, "main.yaml"), "saga: m\nsteps:\n  - {id: a, action: w}\n  - {id: kid, saga: "+child+"}\n")
		if _, err := saga.CompileFile(fsys, "sagas/main.yaml", forks); err != nil {
			t.Errorf("%s, a link inside the directory: %v", child, err)
		}
	}
}
