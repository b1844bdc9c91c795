package local

import (
	"os"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// Every variable of the template resolves locally; the bucket of large
// values is left out (no S3 emulator runs here: the functions keep every
// value inline).
func TestEnvironmentResolvesTheTemplateWithoutTheBucket(t *testing.T) {
	src, err := os.ReadFile("../../infra/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := samtemplate.Parse("template.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Table: "t", QueueURLs: map[string]string{}}
	for _, q := range tpl.Queues {
		e.QueueURLs[q.Name] = "http://127.0.0.1:1/" + q.Name
	}
	for _, fn := range tpl.Functions {
		vars, err := e.environment(tpl, fn)
		if err != nil {
			t.Fatalf("function %s: %v", fn.Name, err)
		}
		for _, v := range vars {
			if strings.HasPrefix(v, "LAMBDASAGA_BUCKET=") {
				t.Fatalf("function %s gets %s locally", fn.Name, v)
			}
		}
		if _, ok := fn.Environment["LAMBDASAGA_BUCKET"]; !ok {
			t.Fatalf("function %s: the template gives it no LAMBDASAGA_BUCKET", fn.Name)
		}
	}
}
