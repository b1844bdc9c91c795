package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/lang"
	"github.com/lambdasaga/lambdasaga/saga"
)

// An attempt that ran into its deadline (Timeout) after the service did
// its work is found out, with a cancel pending, also when the attempt run
// to find it out fails transiently: that failure says nothing of the first
// attempt, which stays unknown until an attempt answers for good. Charge's
// first attempt charges, then times out.
func TestCancelFindsOutATimedOutAttemptPastATransientFailure(t *testing.T) {
	const body = `
steps:
  - id: reserve
    action: inv.reserve
    compensate: {action: inv.release}
  - id: charge
    action: pay.charge
    retry: {attempts: ATTEMPTS, backoff: 1m, max_backoff: 1m}
    compensate: {action: pay.refund}
  - id: ship
    action: ship.send
    compensate: {action: ship.cancel}
`
	cases := []struct {
		name, head, attempts string
		cancel               bool
		// later answers attempt n (2 or more) of charge, the service having charged.
		later func(n int) error
	}{
		{"cancel, then a transient failure of the retry", "saga: u\n", "3", true, func(n int) error {
			if n == 2 {
				return saga.NewError("Unavailable", "503 from the gateway: says nothing of the first attempt")
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			charged := false
			calls := 0
			var e *edgeRig
			e = newEdgeRig(t, tc.head+strings.Replace(body, "ATTEMPTS", tc.attempts, 1), func(ctx context.Context, c saga.Call) (any, error) {
				if c.Step != "charge" || c.Compensation {
					return map[string]any{"id": c.Step + "-1"}, nil
				}
				calls++
				if calls == 1 {
					charged = true
					if tc.cancel {
						if _, err := e.coord.Cancel(context.Background(), c.SagaID); err != nil {
							return nil, err
						}
					}
					return nil, saga.NewError(lang.ErrorTypeTimeout, "charge ran into its deadline after charging")
				}
				if err := tc.later(calls); err != nil {
					return nil, err
				}
				return map[string]any{"id": "p"}, nil
			})
			e.start("s-1", nil)
			e.drain()
			st := e.get("s-1")
			t.Logf("status %s failure %+v charge calls %d; successful calls: %s", st.Status, st.Failure, calls, e.succeeded())
			if charged && !strings.Contains(" "+e.succeeded()+" ", " charge.compensate ") {
				t.Fatalf("charge took effect (attempt 1, then timed out) and was never found out nor refunded: calls %q", e.succeeded())
			}
		})
	}
}
