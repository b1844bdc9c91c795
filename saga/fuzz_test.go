package saga_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lambdasaga/lambdasaga/lang"
	"github.com/lambdasaga/lambdasaga/saga"
)

// FuzzCompile feeds arbitrary documents to the parser and validator: they
// must answer with a plan or a DefinitionError, never panic or hang.
func FuzzCompile(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*")
	for _, file := range files {
		if src, err := os.ReadFile(file); err == nil {
			f.Add(src)
		}
	}
	f.Add([]byte("saga: x\nsteps: [{id: a, set: {x: \"${{'a': {'b': '}'}}}\"}}]"))
	f.Add([]byte("saga: x\nsteps: [{id: a, set: {x: \"${\"}}]"))
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := saga.Compile("fuzz.yaml", src, saga.Options{})
		if err != nil {
			var de *lang.DefinitionError
			if !errors.As(err, &de) || len(de.Problems) == 0 {
				t.Fatalf("error %T without problems: %v", err, err)
			}
			return
		}
		if p.Hash() == "" || len(p.Definition().Steps) == 0 {
			t.Fatal("plan without hash or steps")
		}
	})
}
