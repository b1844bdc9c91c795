package sagactl_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// validate reads a saga step's child next to its file and reports the
// child's problems in the child's file.
func TestValidateForks(t *testing.T) {
	r := runSagactl(t, nil, "validate", "testdata/forks/trip.yaml")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "trip.yaml: ok") {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "validate", "testdata/forks/broken.yaml")
	if r.code != sagactl.ExitUsage {
		t.Fatalf("exit %d, want %d", r.code, sagactl.ExitUsage)
	}
	for _, w := range []string{
		"testdata/forks/sagas/broken-child.yaml:5:", "step charge: with.amount: reads vars.amount, but no step sets it",
	} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
}
