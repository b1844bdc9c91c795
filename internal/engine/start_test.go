package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// Starting a saga again with the same input must find it, whatever the
// offset its timestamps were written with: the stored state keeps them in
// UTC.
func TestStartIsIdempotentForTimestampsWithOffsets(t *testing.T) {
	t.Parallel()
	now := time.Now().In(time.FixedZone("", -5*3600)) // with a monotonic reading, too
	for name, tc := range map[string]struct {
		def   string
		input func() map[string]any
	}{
		"declared timestamp": {
			def:   "saga: ts\ninput: {at: timestamp}\nsteps: [{id: a, set: {x: 1}}]\n",
			input: func() map[string]any { return decodeInput(t, `{"at": "2026-05-01T10:00:00.5+02:00"}`) },
		},
		"undeclared Go time with a zone": {
			def: "saga: ts\nsteps: [{id: a, set: {x: 1}}]\n",
			input: func() map[string]any {
				at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.FixedZone("CEST", 2*3600))
				return map[string]any{"at": at, "list": []any{at}, "map": map[string]any{"at": at}, "empty": []any(nil), "blob": []byte(nil)}
			},
		},
		"timestamps inside declared any, list and map": {
			def: "saga: ts\ninput: {a: any, l: list, m: map}\nsteps: [{id: a, set: {x: 1}}]\n",
			input: func() map[string]any {
				return map[string]any{"a": now, "l": []any{now}, "m": map[string]any{"at": now}}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ts.yaml")
			if err := os.WriteFile(path, []byte(tc.def), 0o600); err != nil {
				t.Fatal(err)
			}
			r := newRig(t, path)
			first := r.start("ts-1", tc.input())
			again, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: "ts-1", Input: tc.input()})
			if err != nil {
				t.Fatalf("second start with the same input: %v", err)
			}
			if again.Version != first.Version {
				t.Fatalf("second start: v%d, want v%d", again.Version, first.Version)
			}
		})
	}
}
