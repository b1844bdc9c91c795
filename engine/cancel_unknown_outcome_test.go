package engine_test

import (
	"context"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/lang"
	"github.com/lambdasaga/lambdasaga/saga"
)

// timeoutSaga's charge retries after a minute: long enough for a cancel
// to land while its retry waits.
const timeoutSaga = `
saga: unknown
steps:
  - id: reserve
    action: inv.reserve
    compensate: {action: inv.release}
  - id: charge
    action: pay.charge
    retry: {attempts: 3, backoff: 1m, max_backoff: 1m}
    compensate: {action: pay.refund}
  - id: ship
    action: ship.send
    compensate: {action: ship.cancel}
`

// A cancel that meets an attempt whose outcome is unknown (it ran into its
// deadline: a Timeout, after the service may have done its work) runs that
// attempt again under the same idempotency key rather than compensating
// without it: the service answers what it did, and a success is then
// compensated with the rest. The cancel lands while the attempt runs, or
// while its retry waits out its backoff.
func TestCancelFindsOutAnAttemptThatTimedOut(t *testing.T) {
	for _, when := range []string{"while the attempt runs", "while its retry waits"} {
		t.Run(when, func(t *testing.T) {
			done := map[string]bool{} // idempotency keys the service has acted on
			var keys []string
			var e *edgeRig
			e = newEdgeRig(t, timeoutSaga, func(ctx context.Context, c saga.Call) (any, error) {
				if c.Step != "charge" || c.Compensation {
					return map[string]any{"id": c.Step + "-1"}, nil
				}
				keys = append(keys, c.IdempotencyKey)
				if done[c.IdempotencyKey] {
					return map[string]any{"id": "p"}, nil // what it did, asked again
				}
				done[c.IdempotencyKey] = true
				if when == "while the attempt runs" {
					if _, err := e.coord.Cancel(context.Background(), c.SagaID); err != nil {
						return nil, err
					}
				}
				return nil, saga.NewError(lang.ErrorTypeTimeout, "charge ran into its deadline after charging")
			})
			e.start("s-1", nil)
			if when == "while its retry waits" {
				for range 2 { // reserve, then charge's first attempt
					d, ok := e.receive()
					if !ok {
						t.Fatal("no message")
					}
					if _, err := e.coord.Handle(context.Background(), d.Body); err != nil {
						t.Fatal(err)
					}
				}
				if st := e.get("s-1"); len(keys) != 1 || st.Status != durable.StatusRunning {
					t.Fatalf("after the first attempt: %d calls, %s", len(keys), st.Status)
				}
				if _, err := e.coord.Cancel(context.Background(), "s-1"); err != nil {
					t.Fatal(err)
				}
			}
			e.drain()
			if len(keys) != 2 || keys[0] != keys[1] {
				t.Fatalf("charge called with keys %q, want twice under one key", keys)
			}
			e.ended(t, "s-1", durable.StatusCompensated, lang.ErrorTypeCancelled, "", "reserve charge charge.compensate reserve.compensate")
		})
	}
}
