package layout_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/lambdasaga/lambdasaga"

// packages lists every package of the module (tests excluded) with its
// imports and everything it depends on, from go list.
func packages(t *testing.T) map[string]pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}|{{.Standard}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		f := strings.Split(strings.TrimSpace(line), "|")
		path := own(f[0])
		pkgs[path] = pkg{imports: strings.Fields(f[1]), deps: strings.Fields(f[2])}
	}
	return pkgs
}

type pkg struct{ imports, deps []string }

// own is the module-relative path of a module package ("." for the
// root package, lambdasaga), or "".
func own(path string) string {
	if path == module {
		return "."
	}
	if rest, ok := strings.CutPrefix(path, module+"/"); ok {
		return rest
	}
	return ""
}

func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func under(path string, dirs ...string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

func TestDependenciesPointOneWay(t *testing.T) {
	pkgs := packages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; expected the whole module", len(pkgs))
	}
	for path, p := range pkgs {
		for _, d := range p.deps {
			switch {
			case path == "durable" && !standard(d):
				t.Errorf("durable depends on %s: the contract imports only the standard library", d)
			case path == "internal/lang" && !standard(d) && own(d) == "" && d != "go.yaml.in/yaml/v3":
				t.Errorf("internal/lang depends on %s: the language needs only a YAML parser (CEL is the compiler's, in saga)", d)
			case under(path, "store", "queue", "objects", "internal/memstore", "internal/memqueue", "internal/memobjects") && (strings.HasPrefix(d, "github.com/google/cel-go") || strings.HasPrefix(d, "github.com/antlr4-go") || strings.HasPrefix(d, "go.yaml.in/yaml")):
				t.Errorf("%s depends on %s: adapters and their suites compile none of the engine", path, d)
			case under(path, "durable", "internal/lang", "internal/saga", "internal/engine") && strings.HasPrefix(d, "github.com/aws/"):
				t.Errorf("%s depends on %s: the core knows nothing of AWS", path, d)
			case d == "github.com/aws/aws-lambda-go/lambda" && path != "." && !slices.Contains(p.deps, module) && !under(path, "functions", "examples/order/cmd", "internal/chaos/fn"):
				t.Errorf("%s depends on aws-lambda-go/lambda: only Lambda mains do, and the root package (StartLambda) with what imports it", path)
			}
		}
		for _, i := range p.imports {
			o := own(i)
			if o == "" {
				continue
			}
			switch {
			case under(path, "store", "queue", "objects", "internal/memstore", "internal/memqueue", "internal/memobjects") && !under(o, "durable") && !under(o, "internal/awslocal"):
				t.Errorf("%s imports %s: an adapter imports the contract (durable), never the engine or another adapter", path, o)
			case path == "internal/lang" && o != "durable":
				t.Errorf("internal/lang imports %s: the language stands below the compiler and the runtime", o)
			case path == "internal/saga" && !under(o, "durable", "internal/lang"):
				t.Errorf("internal/saga imports %s: the pure core imports only the contract and the language", o)
			case path == "internal/engine" && !under(o, "durable", "internal/lang", "internal/saga"):
				t.Errorf("internal/engine imports %s: the runtime imports only the core and the contract", o)
			}
		}
	}
}
