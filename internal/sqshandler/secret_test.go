package sqshandler_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

const secretCard = "4111111111111111"

// quotingStore refuses one update with an error that quotes the item, as a
// backend's validation error may.
type quotingStore struct {
	durable.Store
	refuse bool
}

func (s *quotingStore) SagaUpdate(ctx context.Context, p *durable.SagaUpdateParams) error {
	if s.refuse {
		s.refuse = false
		return errors.New("ValidationException: item rejected: {card_number: " + secretCard + "}")
	}
	return s.Store.SagaUpdate(ctx, p)
}

// The function's log lines (the handler's and the coordinator's) never
// hold a secret input, whatever the errors they report quote; the action
// gets it.
func TestHandlerLogsNoSecretInput(t *testing.T) {
	plan, err := saga.Compile("pay.yaml", []byte(`saga: pay
input: {order_id: string, card_number: secret string}
steps:
  - {id: charge, action: payments.charge, with: {card: "${input.card_number}"}}
`), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	reg := engine.NewRegistry()
	reg.MustRegister("payments.charge", func(ctx context.Context, c saga.Call) (any, error) {
		card, _ := c.Input.(map[string]any)["card"].(string)
		got = append(got, card)
		return nil, saga.Permanent(saga.NewError("CardDeclined", "card "+card+" declined"))
	})
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	store := &quotingStore{Store: memstore.New()}
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: store, Queue: memqueue.New(memqueue.Config{}), Actions: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coord.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "s-1", Input: map[string]any{"order_id": "o-1", "card_number": secretCard}}); err != nil {
		t.Fatal(err)
	}
	h, err := sqshandler.New(sqshandler.Config{Coordinator: coord, Margin: time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r := &batchRig{coord: coord, lh: lambda.NewHandler(h.Handle)}
	store.refuse = true
	if failed := r.invoke(t, body("s-1", 1, durable.QueueAdvance, "charge")); len(failed) != 1 {
		t.Fatalf("failed %v: want the refused update's record handed back", failed)
	}
	if failed := r.invoke(t, body("s-1", 1, durable.QueueAdvance, "charge")); len(failed) != 0 {
		t.Fatalf("failed %v", failed)
	}
	st, err := coord.Get(context.Background(), "s-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusCompensated || len(got) != 2 || got[1] != secretCard {
		t.Fatalf("saga %s, the action got %q", st.Status, got)
	}
	text := logs.String()
	if strings.Contains(text, secretCard) || !strings.Contains(text, "{card_number: [secret]}") {
		t.Fatalf("logs hold the card, or lack the refused update's masked error:\n%s", text)
	}
}
