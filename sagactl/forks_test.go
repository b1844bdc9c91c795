package sagactl_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// validate reads a saga step's child next to its file and reports the
// child's problems in the child's file; until the fork runtime lands, each
// fork step is refused with one problem saying so.
func TestValidateForks(t *testing.T) {
	r := runSagactl(t, nil, "validate", "testdata/forks/trip.yaml")
	if r.code != sagactl.ExitUsage {
		t.Fatalf("exit %d, want %d: %s", r.code, sagactl.ExitUsage, r.stderr)
	}
	want := "testdata/forks/trip.yaml:5:5: step book: parallel steps do not run yet\n" +
		"testdata/forks/trip.yaml:10:5: step ship_all: foreach steps do not run yet\n" +
		"testdata/forks/trip.yaml:17:5: step pay: saga steps do not run yet\n" +
		"sagactl: testdata/forks/trip.yaml: 3 problem(s)\n"
	if r.stderr != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", r.stderr, want)
	}
	r = runSagactl(t, nil, "validate", "testdata/forks/broken.yaml")
	for _, w := range []string{
		"testdata/forks/sagas/broken-child.yaml:5:", "step charge: with.amount: reads vars.amount, but no step sets it",
		"testdata/forks/broken.yaml:4:", "step pay: saga steps do not run yet",
	} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
}
