package engine_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/saga"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func mustCompile(t testing.TB, src string) *saga.Plan {
	t.Helper()
	p, err := saga.Compile("test.yaml", []byte(src), saga.Options{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return p
}

func mustCompileFile(t testing.TB, path string) *saga.Plan {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := saga.Compile(path, src, saga.Options{})
	if err != nil {
		t.Fatalf("compile %s: %v", path, err)
	}
	return p
}

func join(xs []string) string { return strings.Join(xs, " ") }

func equalValues(a, b any) bool { return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b) }

var osReadFile = os.ReadFile

func orderIn(amount float64) map[string]any {
	return map[string]any{"order_id": "o-1", "amount": amount, "items": []any{"a", "b"}}
}

func decodeInput(t *testing.T, src string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(src))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}
