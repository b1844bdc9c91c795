package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
)

func TestStartIsIdempotentAndStatusReads(t *testing.T) {
	q := memqueue.New(memqueue.Config{})
	c, err := client.New(client.Config{Store: memstore.New(), Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in := map[string]any{"order_id": "o-1", "customer": "ada", "amount": 1.5, "currency": "EUR", "card": "4242", "items": []any{"a"}}
	p := client.StartParams{File: "order.yaml", Definition: order.Definition, SagaID: "o-1", Input: in}
	st, err := c.Start(ctx, p)
	if err != nil || st.Version != 1 || q.Len(durable.QueueAdvance) != 1 {
		t.Fatalf("%v %v", st, err)
	}
	if _, err := c.Start(ctx, p); err != nil {
		t.Fatalf("same start again: %v", err)
	}
	p.Input = map[string]any{"order_id": "o-2", "customer": "ada", "amount": 1.5, "currency": "EUR", "card": "4242", "items": []any{"a"}}
	if _, err := c.Start(ctx, p); !errors.Is(err, durable.ErrExists) {
		t.Fatalf("different input: %v", err)
	}
	got, err := c.Status(ctx, "o-1")
	if err != nil || got.Status != durable.StatusRunning {
		t.Fatalf("%v %v", got, err)
	}
	cur, _ := got.Pending()
	if id, err := c.Step(ctx, got, cur.Step); err != nil || id != "reserve" {
		t.Fatalf("%q %v", id, err)
	}
	if _, err := c.Start(ctx, client.StartParams{File: "bad.yaml", Definition: []byte("saga: x")}); !errors.Is(err, lang.ErrInvalidDefinition) {
		t.Fatalf("bad definition: %v", err)
	}
	// reserve is pending (its message is not handled here): the cancel
	// waits for its outcome.
	if st, err := c.Cancel(ctx, "o-1"); err != nil || st.Status != durable.StatusRunning || !st.CancelRequested {
		t.Fatalf("cancel: %v %v", st, err)
	}
}
