package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// The errors of a fork's messages (a child's end counted, the join, an
// undo, a stop) pass through the saga's redactor as a step's do: a store
// or a service may quote an item, and a secret input must not reach the
// logs through them.
func TestForkMessageErrorsMaskTheSagasSecrets(t *testing.T) {
	t.Parallel()
	const card = "4111111111111111"
	r := newForkRig(t, `
saga: pay
input: {card: secret string, items: list}
steps:
  - id: each
    foreach: "${input.items}"
    steps:
      - {id: ship, action: ship.send, with: {arg: "${item}"}}
`, nil)
	r.store.setHook(func(op, key string) error {
		if op == "forkget" {
			return errors.New("ValidationException: the item holds " + card)
		}
		return nil
	})
	// The start launches the first child, whose launch reads the fork
	// record: its error is the start's.
	_, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: "c-1", Input: map[string]any{"card": card, "items": []any{"a"}}})
	if err == nil || strings.Contains(err.Error(), card) {
		t.Fatalf("the start's error: %v; want it, with the card masked", err)
	}
	// Started again, it launches the child; then the join's read of the
	// fork record fails.
	r.store.setHook(nil)
	r.start("c-1", map[string]any{"card": card, "items": []any{"a"}})
	r.store.setHook(func(op, key string) error {
		if op == "forkget" {
			return errors.New("ValidationException: the item holds " + card)
		}
		return nil
	})
	for range 20 {
		if !r.step() {
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) == 0 {
		t.Fatal("no fork message failed")
	}
	for _, err := range r.errs {
		if strings.Contains(err.Error(), card) || strings.Contains(err.Error(), "4111") {
			t.Fatalf("a fork message's error shows the card: %v", err)
		}
		if !strings.Contains(err.Error(), "ValidationException") {
			t.Fatalf("the error lost its cause: %v", err)
		}
	}
}

// When the saga cannot be read again to mask a fork message's error (the
// store throttles that read), the error is withheld rather than shown
// unmasked: its text names the message and why, its cause stays
// (errors.Is) for what the handler decides on it.
func TestForkMessageErrorIsWithheldWhenTheSagaCannotBeReadToMaskIt(t *testing.T) {
	t.Parallel()
	const card = "4111111111111111"
	r := newForkRig(t, `
saga: pay
input: {card: secret string, items: list}
steps:
  - id: each
    foreach: "${input.items}"
    steps:
      - {id: ship, action: ship.send, with: {arg: "${item}"}}
`, nil)
	r.start("c-1", map[string]any{"card": card, "items": []any{"a"}})
	failed := false
	r.store.setHook(func(op, key string) error {
		switch {
		case op == "forkget":
			failed = true
			return fmt.Errorf("%w: ValidationException: the item holds %s", errInjected, card)
		case op == "get" && key == "c-1" && failed:
			return fmt.Errorf("%w: %w", durable.ErrThrottled, errInjected)
		}
		return nil
	})
	for range 20 {
		if !r.step() {
			break
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) == 0 {
		t.Fatal("no fork message failed")
	}
	for _, err := range r.errs {
		if strings.Contains(err.Error(), "4111") {
			t.Fatalf("a fork message's error shows the card: %v", err)
		}
		if !errors.Is(err, errInjected) {
			t.Fatalf("the error lost its cause: %v", err)
		}
	}
}
