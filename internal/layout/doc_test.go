package layout_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportedNamesAreDocumented: every exported name of a package users
// import (everything but internal/, commands and examples) has a doc
// comment, as does every such package.
func TestExportedNamesAreDocumented(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{.Dir}}|{{.Name}}|{{join .GoFiles \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		f := strings.Split(strings.TrimSpace(line), "|")
		path, dir, name := own(f[0]), f[1], f[2]
		if name == "main" || under(path, "internal", "examples", "tools") {
			continue
		}
		checked++
		fset := token.NewFileSet()
		pkgDoc := false
		for _, file := range strings.Fields(f[3]) {
			af, err := parser.ParseFile(fset, filepath.Join(dir, file), nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if af.Doc != nil {
				pkgDoc = true
			}
			for _, miss := range undocumented(af) {
				t.Errorf("%s: %s has no doc comment", fset.Position(miss.Pos()), miss.Name)
			}
		}
		if !pkgDoc {
			t.Errorf("package %s has no package doc comment", path)
		}
	}
	if checked < 6 {
		t.Fatalf("checked %d packages; expected every public one", checked)
	}
}

// undocumented lists the exported names declared in f without a doc
// comment. A name in a documented const or var group counts as documented.
func undocumented(f *ast.File) []*ast.Ident {
	var out []*ast.Ident
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Doc != nil {
				continue
			}
			if d.Recv != nil && !receiverExported(d.Recv) {
				continue
			}
			out = append(out, d.Name)
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
						out = append(out, s.Name)
					}
					if st, ok := s.Type.(*ast.StructType); ok && s.Name.IsExported() {
						out = append(out, undocumentedFields(st)...)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
							out = append(out, n)
						}
					}
				}
			}
		}
	}
	return out
}

func receiverExported(fl *ast.FieldList) bool {
	t := fl.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// undocumentedFields lists the exported fields of st with neither a doc
// comment nor a line comment. Embedded fields are documented by their type.
func undocumentedFields(st *ast.StructType) []*ast.Ident {
	var out []*ast.Ident
	for _, f := range st.Fields.List {
		if f.Doc != nil || f.Comment != nil {
			continue
		}
		for _, n := range f.Names {
			if n.IsExported() {
				out = append(out, n)
			}
		}
	}
	return out
}
