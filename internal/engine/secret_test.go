package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

const secretCard = "4111111111111111"

const secretSaga = `saga: pay
input: {order_id: string, card_number: secret string}
steps:
  - id: reserve
    action: inventory.reserve
    with: {order_id: "${input.order_id}"}
    compensate: {action: inventory.release, with: {order_id: "${input.order_id}"}}
  - id: charge
    action: payments.charge
    with: {order_id: "${input.order_id}", card: "${input.card_number}"}
    retry: {attempts: 3, backoff: 1ms}
    out: payment
`

// lockedBuffer is a log sink the workers write to concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A payment service echoes the card number in its errors, and an action
// panics quoting it: the action gets the number, and neither the step
// events, the logs, nor the saga as shown hold it.
func TestSecretInputNeverShown(t *testing.T) {
	t.Parallel()
	plan := mustCompile(t, secretSaga)
	var (
		mu     sync.Mutex
		got    []string // cards the charge received
		events []engine.StepEvent
	)
	reg := engine.NewRegistry()
	reg.MustRegister("inventory.reserve", func(ctx context.Context, c saga.Call) (any, error) { return map[string]any{}, nil })
	reg.MustRegister("inventory.release", func(ctx context.Context, c saga.Call) (any, error) { return map[string]any{}, nil })
	reg.MustRegister("payments.charge", func(ctx context.Context, c saga.Call) (any, error) {
		card, _ := c.Input.(map[string]any)["card"].(string)
		mu.Lock()
		got = append(got, card)
		n := len(got)
		mu.Unlock()
		switch n {
		case 1:
			panic("card " + card + " made the client panic")
		case 2:
			return nil, fmt.Errorf("gateway: {\"card\":%q,\"status\":\"timeout\"}", card)
		}
		return nil, saga.Permanent(saga.NewError("CardDeclined", "card "+card+" declined"))
	})
	logs := &lockedBuffer{}
	rt, err := embedded.Start(embedded.Config{
		Actions: reg, Workers: 1, Clock: durable.NewManualClock(t0),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnStep: func(ev engine.StepEvent) { mu.Lock(); events = append(events, ev); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := rt.Run(ctx, &engine.StartParams{Plan: plan, SagaID: "s-secret", Input: map[string]any{"order_id": "o-1", "card_number": secretCard}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != "CardDeclined" {
		t.Fatalf("saga %s, failure %v; want compensated after CardDeclined", st.Status, st.Failure)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[0] != secretCard || got[2] != secretCard {
		t.Fatalf("the charge got cards %q, want the real number three times", got)
	}
	var errs []string
	for _, ev := range events {
		if ev.Error != nil {
			errs = append(errs, ev.Error.Error())
		}
	}
	if len(errs) < 3 {
		t.Fatalf("step events with errors: %q; want the two retries and the failure", errs)
	}
	shown := plan.Redactor(st).State(st)
	b, err := json.Marshal(map[string]any{"input": shown.Input, "vars": shown.Vars, "failure": shown.Failure, "output": shown.Output})
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"step events": strings.Join(errs, "\n"), "saga shown": string(b), "failure shown": shown.Failure.Error(), "logs": logs.String()} {
		if strings.Contains(text, secretCard) {
			t.Errorf("%s hold the card number:\n%s", what, text)
		}
		if text == "" {
			t.Errorf("%s are empty: nothing was checked", what)
		}
	}
	if want := "step charge: CardDeclined: card [secret] declined"; shown.Failure.Error() != want {
		t.Errorf("failure shown %q, want %q", shown.Failure.Error(), want)
	}
	if !strings.Contains(errs[1], `"card":"[secret]"`) {
		t.Errorf("retries shown as %q", errs[:2])
	}
	if st.Input["card_number"] != secretCard {
		t.Error("the stored input lost the card number: actions of a resumed saga need it")
	}
}

// An input that fails its type check names the field, never the value.
func TestSecretInputCheckNamesTheField(t *testing.T) {
	t.Parallel()
	plan := mustCompile(t, secretSaga)
	for _, card := range []any{json.Number(secretCard), []any{secretCard}, map[string]any{"n": secretCard}} {
		_, err := plan.CheckInput(map[string]any{"order_id": "o-1", "card_number": card})
		if err == nil || strings.Contains(err.Error(), "4111") || !strings.Contains(err.Error(), "input.card_number") {
			t.Errorf("CheckInput error %v: want one naming input.card_number, without its value", err)
		}
	}
}

func TestExpressionErrorsDoNotEchoValues(t *testing.T) {
	t.Parallel()
	src := `
saga: echo
input: {m: map, s: string, l: list, n: int}
steps:
  - {id: a, set: {x: "${input.m[input.s]}"}}
`
	for _, tt := range []struct{ src, s, secret string }{
		{src, "4111111111111111", "4111111111111111"},
		{strings.Replace(src, "input.m[input.s]", "timestamp(input.s)", 1), "4111111111111111", "4111111111111111"},
		{strings.Replace(src, "input.m[input.s]", "input.l[input.n]", 1), "4111111111111111", "-7777"},
		// A value that contains the word "overload" is masked like any
		// other.
		{src, "SECRET-4111 overload", "SECRET-4111"},
		{strings.Replace(src, "input.m[input.s]", "timestamp(input.s)", 1), "SECRET-4111 overload", "SECRET-4111"},
		{strings.Replace(src, "input.m[input.s]", "input.s.matches(input.s)", 1), "SECRET( no overload", "SECRET("},
	} {
		e := newEdgeRig(t, tt.src, nil)
		e.start("s-1", map[string]any{"m": map[string]any{}, "s": tt.s, "l": []any{}, "n": -7777})
		st := e.get("s-1")
		if st.Failure == nil || strings.Contains(st.Failure.Message, tt.secret) {
			t.Errorf("failure %+v echoes the input's value", st.Failure)
		}
	}
}

func TestPanicTextHidesValues(t *testing.T) {
	t.Parallel()
	var runtimeErr any
	func() {
		defer func() { runtimeErr = recover() }()
		var m map[string]int
		m["x"] = 1 //lint:ignore SA5000 the test needs a real runtime panic
	}()
	if got := engine.PanicText(runtimeErr); !strings.Contains(got, "nil map") {
		t.Errorf("runtime panic described as %q, want the runtime's text", got)
	}
	if got := engine.PanicText("card 4111111111111111"); strings.Contains(got, "4111") || !strings.Contains(got, "string") {
		t.Errorf("panic value described as %q, want its type only", got)
	}
}
