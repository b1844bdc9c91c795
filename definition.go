package lambdasaga

import (
	"io/fs"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Definition is a checked saga definition, ready to start: a saga that
// runs it keeps running this version, whatever is deployed later.
type Definition struct {
	plan *saga.Plan
	file string
}

// ParseDefinition checks a definition's YAML (or JSON) source; file names
// it in problems. Every problem is reported at once, each with its
// file:line, step and field. A definition that calls child sagas (saga
// steps) needs them: use LoadDefinition.
func ParseDefinition(file string, src []byte) (*Definition, error) {
	plan, err := saga.Compile(file, src, saga.Options{})
	if err != nil {
		return nil, err
	}
	return &Definition{plan: plan, file: file}, nil
}

// LoadDefinition reads and checks the definition in file of fsys
// (os.DirFS(dir), an embed.FS), with the child sagas its saga steps name,
// read next to it; each problem names the file it is in.
func LoadDefinition(fsys fs.FS, file string) (*Definition, error) {
	plan, err := saga.CompileFile(fsys, file, saga.Options{})
	if err != nil {
		return nil, err
	}
	return &Definition{plan: plan, file: file}, nil
}

// Name is the saga's name (its definition's saga:).
func (d *Definition) Name() string { return d.plan.Name() }

// Hash identifies the definition's source, its child sagas' included:
// the version a saga started from it runs.
func (d *Definition) Hash() string { return d.plan.Hash() }
