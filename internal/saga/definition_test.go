package saga_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/invalid")

func TestValidDefinitions(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/valid/*")
	if len(files) == 0 {
		t.Fatal("no valid definitions")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p := mustCompileFile(t, f)
			src, _ := os.ReadFile(f)
			if p.Hash() != saga.DefinitionHash(src) || len(p.Hash()) != 64 {
				t.Fatalf("hash %q", p.Hash())
			}
		})
	}
}

// TestInvalidDefinitions compares every problem reported for each file
// under testdata/invalid with its .golden file, exactly.
func TestInvalidDefinitions(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/invalid/*")
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".golden") {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, err = saga.Compile(f, src, saga.Options{})
			if !errors.Is(err, lang.ErrInvalidDefinition) {
				t.Fatalf("err = %v, want ErrInvalidDefinition", err)
			}
			var de *lang.DefinitionError
			if !errors.As(err, &de) || len(de.Problems) == 0 {
				t.Fatalf("err %T has no problems", err)
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(f, filepath.Ext(f)) + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestInvalidDefinitions -update)", err)
			}
			if got != string(want) {
				t.Errorf("problems differ from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
	if n < 10 {
		t.Fatalf("only %d invalid definitions", n)
	}
}

func TestDefinitionLimits(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("saga: big\nsteps:\n")
	for i := range lang.MaxSteps + 1 {
		b.WriteString("  - {id: s" + strconv.Itoa(i) + ", set: {x: 1}}\n")
	}
	tests := []struct {
		name, src, want string
	}{
		{"too many steps", b.String(), "501 steps, over the limit of 500"},
		{"too large", "saga: x\n#" + strings.Repeat("x", lang.MaxDefinitionBytes), "over the limit of 262144"},
		{"expression too long", "saga: x\nsteps: [{id: a, set: {x: \"${" + strings.Repeat("1+", 2100) + "1}\"}}]", "expression is 4201 bytes, over the limit of 4096"},
		{"nested too deep", "saga: x\nsteps: [{id: a, set: {x: " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "}}]", "nested deeper than 32 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := saga.Compile("big.yaml", []byte(tt.src), saga.Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestCheckInput(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `
saga: in
input: {name: string, n: int, price: double, ok: bool, at: timestamp, wait: duration, tags: list, meta: map, blob: bytes, any: any}
steps: [{id: a, set: {x: 1}}]
`)
	good := map[string]any{"name": "x", "n": 3.0, "price": 2, "ok": true, "at": "2026-01-02T03:04:05Z", "wait": "90s",
		"tags": []any{"a"}, "meta": map[string]any{"k": 1.5}, "blob": "aGk=", "any": nil}
	in, err := p.CheckInput(good)
	if err != nil {
		t.Fatal(err)
	}
	if in["n"] != int64(3) || in["price"] != 2.0 || string(in["blob"].([]byte)) != "hi" {
		t.Fatalf("converted %#v", in)
	}
	bad := map[string]any{"name": 1.0, "n": 1.5, "price": "x", "ok": "yes", "at": "tomorrow", "wait": "long",
		"tags": "a", "meta": []any{}, "blob": "!!", "extra": 1}
	_, err = p.CheckInput(bad)
	if !errors.Is(err, saga.ErrInvalidInput) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"input.name: want string, got a double", "input.n: want int, got a double", "input.any: missing (declared any)",
		"input.extra: not declared by saga in", "input.at: want an RFC 3339 timestamp, got a string", "input.blob: want base64 text"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
