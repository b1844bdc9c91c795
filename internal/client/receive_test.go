package client_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// receiveRig is a client, and an embedded runtime on the same store and
// queue standing in for the deployed functions, with the actions of the
// expense and charge test definitions. Each callback token the charge
// action gets is sent on tokens.
type receiveRig struct {
	c      *client.Client
	tokens chan string
	paid   chan any // what pay and ship are called with
}

func newReceiveRig(t *testing.T, store durable.Store, queue durable.Queue, recv durable.Receiver) *receiveRig {
	r := &receiveRig{tokens: make(chan string, 8), paid: make(chan any, 8)}
	reg := engine.NewRegistry()
	reg.Register("expenses.file", func(ctx context.Context, c saga.Call) (any, error) {
		return map[string]any{"id": "claim-" + c.SagaID}, nil
	})
	reg.Register("payments.pay", func(ctx context.Context, c saga.Call) (any, error) { r.paid <- c.Input; return nil, nil })
	reg.Register("expenses.escalate", func(ctx context.Context, c saga.Call) (any, error) { return nil, nil })
	reg.Register("expenses.withdraw", func(ctx context.Context, c saga.Call) (any, error) { return nil, nil })
	reg.Register("payments.charge_async", func(ctx context.Context, c saga.Call) (any, error) {
		r.tokens <- c.CallbackToken
		return map[string]any{"id": "pending-" + c.SagaID}, nil
	})
	reg.Register("payments.refund", func(ctx context.Context, c saga.Call) (any, error) { r.paid <- c.Input; return nil, nil })
	reg.Register("shipping.send", func(ctx context.Context, c saga.Call) (any, error) { r.paid <- c.Input; return nil, nil })
	rt, err := embedded.Start(embedded.Config{Actions: reg, Store: store, Queue: queue, Receiver: recv, Workers: 1, Visibility: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	if r.c, err = client.New(client.Config{Store: store, Queue: queue}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *receiveRig) start(t *testing.T, file, id string, in map[string]any) {
	t.Helper()
	src, err := os.ReadFile("../saga/testdata/valid/" + file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Start(context.Background(), client.StartParams{File: file, Definition: src, SagaID: id, Input: in}); err != nil {
		t.Fatal(err)
	}
}

// until polls a saga until it has the status (or is final), for 20s.
func (r *receiveRig) until(t *testing.T, id string, want durable.Status) *saga.State {
	t.Helper()
	ctx := context.Background()
	for range 2000 {
		st, err := r.c.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status == want {
			return st
		}
		if st.Status.Final() {
			t.Fatalf("saga %s is %s (failure %v), not %s", id, st.Status, st.Failure, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("saga %s never %s", id, want)
	return nil
}

func (r *receiveRig) token(t *testing.T) string {
	t.Helper()
	select {
	case tok := <-r.tokens:
		return tok
	case <-time.After(20 * time.Second):
		t.Fatal("the charge action never ran")
	}
	return ""
}

// Signals and callback completions through the client, on memory and (when
// make test runs the emulators) on DynamoDB and SQS: each receipt, and each
// refusal with the error a caller can match.
func TestSignalsAndCallbacks(t *testing.T) {
	t.Parallel()
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		q := memqueue.New(memqueue.Config{PollInterval: time.Millisecond})
		testSignalsAndCallbacks(t, newReceiveRig(t, memstore.New(), q, q))
	})
	t.Run("emulators", func(t *testing.T) {
		t.Parallel()
		b := awstest.New(t)
		testSignalsAndCallbacks(t, newReceiveRig(t, b.Store, b.Queue, b.Queue))
	})
}

func testSignalsAndCallbacks(t *testing.T, r *receiveRig) {
	ctx := context.Background()

	// A signal to a saga awaiting it is applied, once per id.
	r.start(t, "expense.yaml", "e-1", map[string]any{"amount": 12})
	r.until(t, "e-1", durable.StatusWaiting)
	d, err := r.c.Signal(ctx, "e-1", "approved", map[string]any{"by": "ann"}, client.SignalID("mail-1"))
	if err != nil || d.Receipt != saga.ReceiptApplied || d.State.Status != durable.StatusRunning {
		t.Fatalf("signal: %+v %v", d, err)
	}
	if d, err := r.c.Signal(ctx, "e-1", "approved", map[string]any{"by": "bob"}, client.SignalID("mail-1")); err != nil || d.Receipt != saga.ReceiptDuplicate {
		t.Fatalf("the same signal again: %+v %v", d, err)
	}
	st := r.until(t, "e-1", durable.StatusSucceeded)
	if by := st.Vars["decision"].(map[string]any)["by"]; by != "ann" {
		t.Fatalf("decision %v", st.Vars["decision"])
	}
	if paid := <-r.paid; paid.(map[string]any)["approved_by"] != "ann" {
		t.Fatalf("pay got %v", paid)
	}

	// Refusals, each with its sentinel.
	if _, err := r.c.Signal(ctx, "e-1", "approved", nil); !errors.Is(err, saga.ErrNotReceiving) {
		t.Fatalf("to a finished saga: %v", err)
	}
	if _, err := r.c.Signal(ctx, "nobody", "approved", nil); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("to no saga: %v", err)
	}
	big := strings.Repeat("x", lang.MaxSignalBytes)
	if _, err := r.c.Signal(ctx, "e-1", "approved", big); !errors.Is(err, saga.ErrBadDelivery) || strings.Contains(err.Error(), "xxx") {
		t.Fatalf("a payload over the limit: %v", err)
	}

	// A signal before its await is kept, and taken by the await.
	r.start(t, "expense.yaml", "e-2", map[string]any{"amount": 5})
	d, err = r.c.Signal(ctx, "e-2", "approved", map[string]any{"by": "cy"})
	if err != nil || (d.Receipt != saga.ReceiptKept && d.Receipt != saga.ReceiptApplied) {
		t.Fatalf("early signal: %+v %v", d, err)
	}
	if st := r.until(t, "e-2", durable.StatusSucceeded); st.Vars["decision"].(map[string]any)["by"] != "cy" {
		t.Fatalf("decision %v", st.Vars["decision"])
	}
	<-r.paid

	// A callback completed: its output replaces the action's in out.
	r.start(t, "charge.yaml", "c-1", map[string]any{"amount": 700})
	tok := r.token(t)
	r.until(t, "c-1", durable.StatusWaiting)
	if _, err := r.c.CompleteCallback(ctx, tok[:len(tok)-2]+"AA", map[string]any{"id": "forged"}); !errors.Is(err, saga.ErrBadToken) {
		t.Fatalf("a tampered token: %v", err)
	}
	if _, err := r.c.CompleteCallback(ctx, "lscb1_nonsense!", nil); !errors.Is(err, saga.ErrBadToken) {
		t.Fatalf("a malformed token: %v", err)
	}
	d, err = r.c.CompleteCallback(ctx, tok, map[string]any{"id": "pay-9"})
	if err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("complete: %+v %v", d, err)
	}
	if d, err := r.c.CompleteCallback(ctx, tok, map[string]any{"id": "pay-10"}); err != nil || d.Receipt != saga.ReceiptDuplicate {
		t.Fatalf("completed twice: %+v %v", d, err)
	}
	r.until(t, "c-1", durable.StatusSucceeded)
	if shipped := <-r.paid; shipped.(map[string]any)["payment"] != "pay-9" {
		t.Fatalf("ship got %v", shipped)
	}

	// A callback failed: the step retries with a new token; the old one,
	// completed now, is a repeat and changes nothing. Failed again, the step fails and its action (which
	// returned: its work may have happened) is compensated.
	r.start(t, "charge.yaml", "c-2", map[string]any{"amount": 800})
	first := r.token(t)
	r.until(t, "c-2", durable.StatusWaiting)
	if _, err := r.c.FailCallback(ctx, first, "", "no type"); !errors.Is(err, saga.ErrBadDelivery) {
		t.Fatalf("a failure without a type: %v", err)
	}
	if d, err := r.c.FailCallback(ctx, first, "Declined", "insufficient funds"); err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("fail: %+v %v", d, err)
	}
	second := r.token(t)
	if second == first {
		t.Fatal("the retry got the same token")
	}
	if d, err := r.c.CompleteCallback(ctx, first, nil); err != nil || d.Receipt != saga.ReceiptDuplicate {
		t.Fatalf("the first attempt's token again: %+v %v", d, err)
	}
	r.until(t, "c-2", durable.StatusWaiting)
	if _, err := r.c.FailCallback(ctx, second, "Declined", "insufficient funds"); err != nil {
		t.Fatal(err)
	}
	st = r.until(t, "c-2", durable.StatusCompensated)
	if st.Failure == nil || st.Failure.Type != "Declined" {
		t.Fatalf("failure %v", st.Failure)
	}
	if refund := <-r.paid; refund.(map[string]any)["payment"] != "pending-c-2" {
		t.Fatalf("refund got %v", refund)
	}

	// A saga cancelled while it waits on a callback compensates at once;
	// its token is then refused.
	r.start(t, "charge.yaml", "c-3", map[string]any{"amount": 900})
	tok = r.token(t)
	r.until(t, "c-3", durable.StatusWaiting)
	if _, err := r.c.Cancel(ctx, "c-3"); err != nil {
		t.Fatal(err)
	}
	r.until(t, "c-3", durable.StatusCompensated)
	<-r.paid
	if _, err := r.c.CompleteCallback(ctx, tok, nil); !errors.Is(err, saga.ErrNotReceiving) {
		t.Fatalf("the token of a cancelled saga: %v", err)
	}
}
