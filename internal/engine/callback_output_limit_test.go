package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A callback step whose output is kept with its completion (its var is
// written by another step too) fails with StateTooLarge when the token's
// output does not fit, and its compensation reads the action's own
// output, whatever it was ("pending", or null): never the output of the
// completion the saga refused (30 KiB here).
func TestCallbackOutputTooLargeLeavesTheActionsOutputForItsCompensation(t *testing.T) {
	for _, immediate := range []any{"pending", nil} {
		r := newTextRig(t, `saga: big
steps:
  - id: load
    action: p.load
    out: blob
  - id: charge
    action: p.charge
    callback: {timeout: 1h}
    out: payment
    compensate: {action: p.refund, with: {payment: "${vars.payment}"}}
  - id: later
    await: {signal: go, timeout: 1h}
  - id: other
    set: {payment: "x"}
`)
		ctx := context.Background()
		var token string
		var refunds []any
		r.reg.Register("p.load", func(ctx context.Context, c saga.Call) (any, error) { return strings.Repeat("b", 285<<10), nil })
		r.reg.Register("p.charge", func(ctx context.Context, c saga.Call) (any, error) { token = c.CallbackToken; return immediate, nil })
		r.reg.Register("p.refund", func(ctx context.Context, c saga.Call) (any, error) {
			refunds = append(refunds, c.Input.(map[string]any)["payment"])
			return nil, nil
		})
		r.start("b-1", nil)
		r.drain()
		d, err := r.coord.CompleteCallback(ctx, token, strings.Repeat("c", 30<<10))
		if err != nil || d.Receipt != saga.ReceiptApplied || d.State.Failure == nil || d.State.Failure.Type != "StateTooLarge" {
			t.Fatalf("immediate output %v: the completion: %+v %v", immediate, d, err)
		}
		r.drain()
		st := r.get("b-1")
		if st.Status != durable.StatusCompensated || len(refunds) != 1 {
			t.Fatalf("immediate output %v: %s, refunds %d", immediate, st.Status, len(refunds))
		}
		if got, _ := refunds[0].(string); refunds[0] != immediate {
			t.Errorf("action returned %v: its compensation read %d bytes of the refused completion, not the action's output", immediate, len(got))
		}
	}
}
