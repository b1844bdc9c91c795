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

// plan --signal gives an await the payload a later step reads; without
// it the await gets null, and plan says how to give one.
func TestPlanTakesSignalPayloads(t *testing.T) {
	const expense = "../examples/expense/expense.yaml"
	in := "@../examples/expense/testdata/claim.json"
	r := runSagactl(t, nil, "plan", expense, "--fail", "pay", "--input", in, "--signal", `approved={"approved": true, "by": "ann"}`)
	if r.code != sagactl.ExitOK || !strings.HasPrefix(r.stdout, "if step pay fails for good (path: file -> approval -> check -> pay)") ||
		!strings.Contains(r.stdout, "with the payload of --signal") {
		t.Fatalf("with --signal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "plan", expense, "--fail", "pay", "--input", in)
	if !strings.Contains(r.stdout, "with no payload: give one with --signal approved=JSON") {
		t.Fatalf("without: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "plan", expense, "--fail", "pay", "--input", in, "--signal", "nosuch={}")
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "awaits no signal of that name") {
		t.Fatalf("an unknown signal: exit %d\n%s", r.code, r.stderr)
	}
}
