package saga_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
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
	// Forks, nested, with every kind inside: compiled with forks allowed
	// too, so that the rules they will run under are fuzzed now.
	f.Add([]byte(tripYAML))
	f.Add([]byte(`saga: x
steps:
  - id: f
    foreach: "${[1, 2]}"
    as: n
    concurrency: 2
    steps:
      - {id: s, switch: [{if: "${index > 0}", next: p}, {default: w}]}
      - {id: w, wait: {for: 1s}}
      - id: p
        parallel:
          - steps: [{id: a, action: w, out: o, catch: [{errors: ["*"], next: b}]}, {id: b, set: {v: "${n}"}}]
          - steps: [{id: g, foreach: "${[n]}", steps: [{id: c, await: {signal: go}, out: sig}]}]
        out: both
        catch: [{errors: ["*"], next: e}]
      - {id: e, fail: {error: Oops}}
    out: all
  - {id: d, saga: child.yaml, with: {v: "${vars.all}"}}
`))
	f.Add([]byte("lambdasaga bundle 1\nsaga 49\nsaga: m\nsteps:\n  - {id: a, saga: c.yaml, out: r}\n\nfile 38 c.yaml\nsaga: c\nsteps:\n  - {id: b, action: w}\n\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, opts := range []saga.Options{{}, saga.AllowForks(saga.Options{})} {
			p, err := saga.Compile("fuzz.yaml", src, opts)
			if err != nil {
				var de *lang.DefinitionError
				if !errors.As(err, &de) || len(de.Problems) == 0 {
					t.Fatalf("error %T without problems: %v", err, err)
				}
				continue
			}
			if p.Hash() == "" || len(p.Definition().Steps) == 0 {
				t.Fatal("plan without hash or steps")
			}
			if p.Hash() != saga.DefinitionHash(p.Source()) {
				t.Fatal("the hash is not the hash of the source")
			}
		}
	})
}
