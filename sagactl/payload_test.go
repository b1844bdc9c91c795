package sagactl_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

// A signal's payload or a callback's output with a number in it is
// accepted: `sagactl signal ID approved --payload '{"cents": 5}'`, `run
// --signal 'approved={"cents": 5}'`, `plan --signal ...` and `callback
// TOKEN --output '{"id": 1}'` get past the payload's check (decoded with
// UseNumber, a json.Number must not reach saga.CheckDelivery, which
// cannot store it). The examples send no numbers, so only this test
// covers them.
func TestPayloadsWithNumbersAreAccepted(t *testing.T) {
	// run --signal: in memory, nothing else needed.
	r := runSagactl(t, nil, "run", expenseExample, "--input", claimInput, "--signal", `approved={"approved": true, "by": "maria", "cents": 5}`)
	if r.code != sagactl.ExitOK || strings.Contains(r.stderr, "json.Number") {
		t.Errorf("run --signal with a number: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// plan --signal: a dry run, nothing else needed.
	r = runSagactl(t, nil, "plan", expenseExample, "--fail", "pay", "--input", claimInput, "--signal", `approved={"approved": true, "by": "maria", "cents": 5}`)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "if step pay fails for good") {
		t.Errorf("plan --signal with a number: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// signal and callback: with no stack named, a good payload gets as far
	// as asking where the sagas are.
	const where = "say where the sagas are"
	r = runSagactl(t, nil, "signal", "e-1", "approved", "--payload", `{"approved": true, "cents": 5}`)
	if !strings.Contains(r.stderr, where) {
		t.Errorf("signal with a number in its payload: exit %d, want %q in:\n%s", r.code, where, r.stderr)
	}
	token := callbackToken(t)
	r = runSagactl(t, nil, "callback", token, "--output", `{"id": "pay-1", "cents": 700}`)
	if !strings.Contains(r.stderr, where) {
		t.Errorf("callback with a number in its output: exit %d, want %q in:\n%s", r.code, where, r.stderr)
	}
}

// callbackToken returns a genuine token of charge.yaml's callback step.
func callbackToken(t *testing.T) string {
	t.Helper()
	tokens := make(chan string, 4)
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		if c.CallbackToken != "" {
			select {
			case tokens <- c.CallbackToken:
			default:
			}
		}
		return map[string]any{"id": "pending"}, nil
	})
	rt, err := embedded.Start(embedded.Config{Actions: reg, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	src, err := os.ReadFile(chargeFile)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := saga.Compile("charge.yaml", src, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Coordinator.Start(context.Background(), &engine.StartParams{Plan: plan, SagaID: "c-1", Input: map[string]any{"amount": 700}}); err != nil {
		t.Fatal(err)
	}
	select {
	case tok := <-tokens:
		return tok
	case <-time.After(10 * time.Second):
		t.Fatal("no callback token")
	}
	return ""
}

// In sagactl run a simulated action of a callback step "completes its
// token with its input as output" (README, docs). An input over
// lang.MaxSignalBytes (32 KiB; the saga's input may be 128 KiB) still
// completes it: a saga that nothing was told to fail succeeds (exit 0),
// rather than retry and compensate on a completion refused as an invalid
// delivery.
func TestRunSimulatedCallbackWithLargeInput(t *testing.T) {
	dir := t.TempDir()
	def := filepath.Join(dir, "bigcb.yaml")
	if err := os.WriteFile(def, []byte("saga: bigcb\ninput: {blob: string}\nsteps:\n  - {id: charge, action: pay.charge, with: {blob: \"${input.blob}\"}, callback: {timeout: 1h}, out: paid}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]string{"blob": strings.Repeat("x", 40000)})
	input := filepath.Join(dir, "in.json")
	if err := os.WriteFile(input, in, 0o600); err != nil {
		t.Fatal(err)
	}
	r := runSagactl(t, nil, "run", def, "--input", "@"+input)
	if r.code != sagactl.ExitOK {
		t.Fatalf("a valid saga, nothing --fail'ed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
