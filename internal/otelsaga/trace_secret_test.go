package otelsaga_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

// An action whose error quotes the saga's secret card number (a payment
// service echoing what it was given): the error reaches the traces (X-Ray,
// through the ADOT layer) that an operator reads, so neither a span's
// status nor its recorded exception may hold the card, as the logs and the
// step events hold it masked (docs/DEFINITIONS.md, "Secrets: what is
// hidden where").
func TestTraceMasksASecretInAnActionError(t *testing.T) {
	t.Parallel()
	const card = "4111111111111111"
	r := newRig(t)
	r.plan = sagatest.MustCompile(t, `
saga: pay
input: {card: secret string}
steps:
  - id: charge
    action: pay.charge
    with: {card: "${input.card}"}
    retry: {attempts: 1}
`)
	r.actions.MustRegister("pay.charge", func(_ context.Context, call saga.Call) (any, error) {
		in, _ := call.Input.(map[string]any)
		return nil, saga.Permanent(saga.NewError("CardDeclined", fmt.Sprintf("card %v declined", in["card"])))
	})
	if _, err := r.coordinator(true).Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: "p-1", Input: map[string]any{"card": card}}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	spans := r.spansOf("p-1")
	if len(spans) == 0 {
		t.Fatal("no spans")
	}
	failed := false
	for _, s := range spans {
		if s.Status().Description != "" {
			failed = true
		}
		if strings.Contains(s.Status().Description, card) {
			t.Errorf("span %q's status shows the secret card: %q", s.Name(), s.Status().Description)
		}
		for _, e := range s.Events() {
			for _, kv := range e.Attributes {
				if strings.Contains(kv.Value.String(), card) {
					t.Errorf("span %q's event %s shows the secret card in %s: %q", s.Name(), e.Name, kv.Key, kv.Value.String())
				}
			}
		}
	}
	if !failed {
		t.Fatal("no span records the charge's failure: the test shows nothing")
	}
	if strings.Contains(r.logs.String(), card) {
		t.Errorf("the logs show the secret card")
	}
}
