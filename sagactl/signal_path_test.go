package sagactl_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// cost follows the path a signal's payload chooses, as plan does, and
// both usage lines say how to give one.
func TestCostAndPlanFollowASignalsPayload(t *testing.T) {
	t.Parallel()
	r := runSagactl(t, nil, "cost", expenseExample, "--input", claimInput, "--signal", "approved=@../examples/expense/testdata/approved.json")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "path [file approval check pay paid]\n") {
		t.Errorf("cost --signal approved: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "cost", expenseExample, "--input", claimInput, "--signal", `approved={"approved": false, "by": "m", "cents": 5}`)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "path [file approval check] then 1 compensation(s)") {
		t.Errorf("cost --signal with a rejection: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "cost", expenseExample, "--input", claimInput, "--signal", "nosuch={}")
	if r.code != sagactl.ExitUsage {
		t.Errorf("cost --signal of no await: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, cmd := range []string{"plan", "cost"} {
		r := runSagactl(t, nil, cmd, "--help")
		usage, _, _ := strings.Cut(r.stdout, "\n")
		if !strings.Contains(usage, "[--signal NAME=JSON|@FILE]...") {
			t.Errorf("%s's usage line lacks --signal: %q", cmd, usage)
		}
	}
}
