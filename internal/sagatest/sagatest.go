// Package sagatest holds what the tests of saga and engine share: plans
// compiled from definitions that must compile, inputs decoded from JSON as
// sagactl decodes them, and the input of the order saga in
// internal/saga/testdata/valid/order.yaml.
package sagatest

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// MustCompile compiles src (named test.yaml in problems) with the default
// options, failing the test on any problem.
func MustCompile(t testing.TB, src string) *saga.Plan {
	t.Helper()
	return MustCompileWith(t, src, saga.Options{})
}

// MustCompileWith compiles src with opts, failing the test on any problem.
func MustCompileWith(t testing.TB, src string, opts saga.Options) *saga.Plan {
	t.Helper()
	p, err := saga.Compile("test.yaml", []byte(src), opts)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return p
}

// MustCompileFile compiles the definition in the file at path.
func MustCompileFile(t testing.TB, path string) *saga.Plan {
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

// DecodeInput decodes a JSON object with numbers kept as json.Number, as
// sagactl reads an input.
func DecodeInput(t testing.TB, src string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(src))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// OrderInput is an input of internal/saga/testdata/valid/order.yaml for amount.
func OrderInput(amount float64) map[string]any {
	return map[string]any{"order_id": "o-1", "amount": amount, "items": []any{"a", "b"}}
}

// LinearSaga is the source of a saga of n action steps (action work, ids
// s0, s1, …), each compensable (action undo) and writing its output into
// vars: the shape the benchmarks and the meters measure.
func LinearSaga(n int) string {
	var s strings.Builder
	s.WriteString("saga: linear\nsteps:\n")
	for i := range n {
		fmt.Fprintf(&s, "  - {id: s%d, action: work, out: r%d, compensate: {action: undo}}\n", i, i)
	}
	return s.String()
}

// ReadBack is st as a read gives it: encoded and decoded. A chain goes on
// from the state it holds, which must be this (docs/PROTOCOL.md, "Chains").
func ReadBack(t testing.TB, st *saga.State) *saga.State {
	t.Helper()
	b, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	read := &saga.State{}
	if err := read.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	return read
}
