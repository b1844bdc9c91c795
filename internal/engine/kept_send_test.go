package engine_test

import (
	"context"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Keeping a signal is one write beside the version, which changes neither
// the version nor the outbox: it sends nothing. A copy of the action's
// message would cost a send, a receive, a read, a delete and an
// invocation, or a second handling of the same version (bench's
// TestCallbackCost counts them).
func TestAKeptSignalSendsNoMessage(t *testing.T) {
	r := newRig(t, "../saga/testdata/valid/expense.yaml")
	r.start("e-kept", map[string]any{"amount": 3})
	if n := r.q.Len(durable.QueueAdvance); n != 1 {
		t.Fatalf("after the start the advance queue holds %d messages, want file's 1", n)
	}
	d, err := r.coord.Signal(context.Background(), &engine.SignalParams{SagaID: "e-kept", Name: "approved", Payload: map[string]any{"by": "ann"}, ID: "s-1"})
	if err != nil || d.Receipt != saga.ReceiptKept {
		t.Fatalf("signal before the await: %+v %v", d, err)
	}
	if n := r.q.Len(durable.QueueAdvance); n != 1 {
		t.Errorf("after a kept signal the advance queue holds %d messages, want 1: the kept write sent the outbox again", n)
	}
}
