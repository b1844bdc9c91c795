package layout_test

import (
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestPublicSignaturesNameNoInternalType: no exported name of a package
// users import (the root, the contract, the adapters, the conformance
// suites, sagactl) has a type from internal/ in its signature: a
// function's or method's parameters and results, an exported field, a
// variable's or constant's type, a type's definition. What a user can
// reach, they can name.
func TestPublicSignaturesNameNoInternalType(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{.Name}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// Export data from the build cache: no dependency type-checked again.
	exp, err := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}|{{.Export}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	files := map[string]string{}
	for line := range strings.Lines(strings.TrimSpace(string(exp))) {
		p, f, _ := strings.Cut(strings.TrimSpace(line), "|")
		files[p] = f
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := files[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	checked := 0
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		path, name, _ := strings.Cut(strings.TrimSpace(line), "|")
		if rel := own(path); name == "main" || under(rel, "internal", "examples", "tools", "bench") {
			continue
		}
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("type-check %s: %v", path, err)
		}
		checked++
		scope := pkg.Scope()
		for _, n := range scope.Names() {
			obj := scope.Lookup(n)
			if !obj.Exported() {
				continue
			}
			where := own(path) + "." + n
			if own(path) == "." {
				where = "lambdasaga." + n
			}
			if tn, ok := obj.(*types.TypeName); ok {
				named, _ := tn.Type().(*types.Named)
				if named == nil { // an alias
					checkType(t, where, tn.Type(), map[types.Type]bool{})
					continue
				}
				checkType(t, where, named.Underlying(), map[types.Type]bool{})
				for i := range named.NumMethods() {
					if m := named.Method(i); m.Exported() {
						checkType(t, where+"."+m.Name(), m.Type(), map[types.Type]bool{})
					}
				}
				continue
			}
			checkType(t, where, obj.Type(), map[types.Type]bool{})
		}
	}
	if checked < 6 {
		t.Fatalf("checked %d packages; expected every public one", checked)
	}
}

// checkType reports an internal named type anywhere in typ's exported
// surface: unexported struct fields are skipped, as users cannot reach
// them.
func checkType(t *testing.T, where string, typ types.Type, seen map[types.Type]bool) {
	t.Helper()
	if seen[typ] {
		return
	}
	seen[typ] = true
	switch x := typ.(type) {
	case *types.Named:
		if p := x.Obj().Pkg(); p != nil && strings.Contains(p.Path()+"/", "/internal/") {
			t.Errorf("%s names %s.%s, a type users cannot import", where, p.Path(), x.Obj().Name())
		}
		for i := range x.TypeArgs().Len() {
			checkType(t, where, x.TypeArgs().At(i), seen)
		}
	case *types.Alias:
		checkType(t, where, types.Unalias(x), seen)
	case *types.Pointer:
		checkType(t, where, x.Elem(), seen)
	case *types.Slice:
		checkType(t, where, x.Elem(), seen)
	case *types.Array:
		checkType(t, where, x.Elem(), seen)
	case *types.Map:
		checkType(t, where, x.Key(), seen)
		checkType(t, where, x.Elem(), seen)
	case *types.Chan:
		checkType(t, where, x.Elem(), seen)
	case *types.Signature:
		for i := range x.Params().Len() {
			checkType(t, where, x.Params().At(i).Type(), seen)
		}
		for i := range x.Results().Len() {
			checkType(t, where, x.Results().At(i).Type(), seen)
		}
	case *types.Struct:
		for i := range x.NumFields() {
			if f := x.Field(i); f.Exported() {
				checkType(t, where+"."+f.Name(), f.Type(), seen)
			}
		}
	case *types.Interface:
		for i := range x.NumMethods() {
			if m := x.Method(i); m.Exported() {
				checkType(t, where+"."+m.Name(), m.Type(), seen)
			}
		}
	}
}
