package sagactl_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// TestPlanAccountIsConsistent: what plan lists as run, failed or not run
// agrees with how it says the saga ends.
func TestPlanAccountIsConsistent(t *testing.T) {
	const badundo = "testdata/badundo.yaml"
	tests := []struct {
		args []string
		want string
	}{
		{[]string{badundo, "--fail", "ship", "--fail", "charge.compensate"},
			"if step ship fails for good (path: reserve -> charge -> ship), compensation runs:\n" +
				"  1. undo charge: payments.refund: fails for good (SimulatedFailure: --fail)\n" +
				"  not run: undo reserve (compensation stops at the first that fails)\n" +
				"the saga ends compensation_failed, parked for an operator\n"},
		{[]string{badundo, "--fail", "charge"},
			"if step charge fails for good (path: reserve -> charge), compensation runs:\n" +
				"  1. undo reserve: inventory.release: fails for good (ExpressionError: "},
		{[]string{badundo, "--fail", "charge", "--input", `{"items": [1, 2, 3, 4]}`},
			"if step charge fails for good (path: reserve -> charge), compensation runs:\n" +
				"  1. undo reserve: inventory.release\n" +
				"the saga ends compensated\n"},
		{[]string{badundo, "--fail", "reserve"},
			"if step reserve fails for good (path: reserve), nothing is compensated: no completed step declares compensate\n" +
				"the saga ends compensated\n"},
	}
	for _, tt := range tests {
		r := runSagactl(t, nil, append([]string{"plan"}, tt.args...)...)
		if r.code != sagactl.ExitOK || !strings.HasPrefix(r.stdout, tt.want) {
			t.Errorf("%v: exit %d\n%s%s\nwant\n%s", tt.args, r.code, r.stdout, r.stderr, tt.want)
		}
		if strings.Contains(r.stdout, "nothing") && !strings.HasSuffix(r.stdout, "ends compensated\n") {
			t.Errorf("%v: says nothing is compensated, and ends otherwise:\n%s", tt.args, r.stdout)
		}
		if strings.Contains(r.stdout, ": fails for good (") != strings.Contains(r.stdout, "ends compensation_failed") {
			t.Errorf("%v: a compensation that fails and the end disagree:\n%s", tt.args, r.stdout)
		}
	}
}
