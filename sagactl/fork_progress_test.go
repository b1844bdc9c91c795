package sagactl_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// run's progress names the run a step of a fork belongs to: a foreach's
// iteration by its index, a parallel's branch by its number; a child
// saga's steps, one run, keep their ids.
func TestRunProgressNamesForkIterationsAndBranches(t *testing.T) {
	t.Parallel()
	r := runSagactl(t, nil, "run", "testdata/forks/trip.yaml", "--input", "@testdata/forks/trip.json")
	if r.code != sagactl.ExitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		`(?m)^  ship_one\[0\] +completed`, `(?m)^  ship_one\[1\] +completed`, `(?m)^  ship_one\[2\] +completed`,
		`(?m)^  hotel \(branch 1\) +completed`, `(?m)^  flight \(branch 2\) +completed`,
		`(?m)^  charge +completed`, `(?m)^  ship_all +completed`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("progress lacks %s:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "  ship_one  ") {
		t.Errorf("an iteration without its index:\n%s", r.stdout)
	}
}
