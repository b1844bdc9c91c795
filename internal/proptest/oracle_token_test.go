package proptest

import (
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// The call that finds out an unknown outcome asks again under its
// attempt's token, numbered after the attempts: one token, two calls, and
// no violation. Another attempt, or another step, on the same token is
// one.
func TestOracleTakesTheFindingOutCallOnItsAttemptsToken(t *testing.T) {
	o := &oracle{tokens: map[string]tokenRef{}, res: &Result{}}
	attempt := saga.Call{SagaID: "p", Step: "pay", Attempt: 2, IdempotencyKey: "p/pay/3", CallbackToken: "lscb1_x"}
	o.issued(attempt, 1)
	findOut := attempt
	findOut.Attempt = 3
	o.issued(findOut, 1)
	if len(o.res.Violations) != 0 {
		t.Fatalf("the finding-out call: %+v", o.res.Violations)
	}
	if ref := o.tokens["lscb1_x"]; ref.attempt != 2 {
		t.Fatalf("the token now names attempt %d, want the attempt's, 2", ref.attempt)
	}
	again := attempt // the same attempt given the token twice
	o.issued(again, 1)
	other := attempt
	other.Step, other.Attempt, other.IdempotencyKey = "ship", 5, "p/ship/4"
	o.issued(other, 2)
	if len(o.res.Violations) != 2 {
		t.Fatalf("two repeats of a token that are no finding out: %d violations, want 2", len(o.res.Violations))
	}
}
