package iamcheck_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/iamcheck"
)

// The pause item (pk CONTROL) as recorded by the kill test and sagactl's
// pause test: every function reads it with the GetItem the template
// grants on the table, the operator's policy writes it, and the client's
// policy, which has no UpdateItem, cannot pause.
func TestPausesAreReadByTheFunctionsAndWrittenByOperators(t *testing.T) {
	t.Parallel()
	rec, err := iamcheck.Read("testdata/pauses.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	denials, cases, _ := check(t, engine(t), "../../infra/template.yaml", rec)
	if len(cases) != 6 {
		t.Fatalf("%d cases, want 6", len(cases))
	}
	if len(denials) != 1 || !strings.HasPrefix(denials[0], "SagaClientPolicy: UpdateItem") {
		t.Fatalf("denied: %q, want only the client's UpdateItem", denials)
	}
}
