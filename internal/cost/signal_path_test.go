package cost_test

import (
	"bytes"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/cost"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

var claim = map[string]any{"claim_id": "c", "employee": "e", "cents": int64(5)}

func expensePlan(t *testing.T) *saga.Plan {
	t.Helper()
	src, err := os.ReadFile("../../examples/expense/expense.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := saga.Compile("expense.yaml", src, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// A signal's payload can choose the path: the walk delivers the payload
// Params.Signals gives for the awaited signal, null without one.
func TestWalkFollowsTheSignalsPayload(t *testing.T) {
	t.Parallel()
	plan := expensePlan(t)
	in := claim
	rejected, err := cost.Walk(plan, cost.Params{Input: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	approved, err := cost.Walk(plan, cost.Params{Input: in, Signals: map[string]any{"approved": map[string]any{"approved": true, "by": "maria"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(rejected.Path, "pay") || rejected.Compensations != 1 {
		t.Errorf("without a payload: path %v, %d compensations", rejected.Path, rejected.Compensations)
	}
	if want := []string{"file", "approval", "check", "pay", "paid"}; !slices.Equal(approved.Path, want) || approved.Compensations != 0 || approved.ActionSteps != 2 {
		t.Errorf("approved: path %v, want %v; %d compensations, %d action steps", approved.Path, want, approved.Compensations, approved.ActionSteps)
	}
}

// A service the saga does not fit is reported as not fitting, with no
// price: Step Functions Express cannot wait for a signal.
func TestReportPricesNoServiceTheSagaDoesNotFit(t *testing.T) {
	t.Parallel()
	s, err := cost.Walk(expensePlan(t), cost.Params{Input: claim}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	s.Report(&b, "expense", 1000)
	var line string
	for l := range strings.Lines(b.String()) {
		if strings.HasPrefix(l, "Step Functions Express") && !strings.Contains(l, ":") {
			line = l
		}
	}
	if !strings.Contains(line, "does not fit") || strings.Contains(line, "$") || regexp.MustCompile(`[0-9]x`).MatchString(line) {
		t.Errorf("Express's row: %q, want it to say it does not fit, with no price:\n%s", line, b.String())
	}
}
