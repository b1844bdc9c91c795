package sagactl_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/awslocal"
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

// run --signal sends its signals after the saga has started, one by one.
// When a step before the awaits fails (--fail), the saga compensates while
// the signals are still being sent, and the next one is refused
// (ErrNotReceiving): run still reports the saga's outcome and exits 2
// (compensated), not 1, a usage error. In memory the window is short; on
// the emulators, where each signal is a round trip, it is hit every time
// from the third signal on.
func TestRunSignalsAfterAFailingStepOnEmulators(t *testing.T) {
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sq := awslocal.Endpoint(t, awslocal.EnvSQS)
	var def strings.Builder
	def.WriteString("saga: manyawaits\nsteps:\n  - {id: a, action: svc.a}\n")
	args := []string{"run", "", "--fail", "a", "--json", "--dynamodb-endpoint", dyn, "--sqs-endpoint", sq, "--table", "sagactl-payload-edges", "--queue-prefix", "sagactl-payload-edges-"}
	for i := range 12 {
		def.WriteString("  - {id: w" + string(rune('a'+i)) + ", await: {signal: s" + string(rune('a'+i)) + ", timeout: 1h}}\n")
		args = append(args, "--signal", "s"+string(rune('a'+i))+"={}")
	}
	file := filepath.Join(t.TempDir(), "manyawaits.yaml")
	if err := os.WriteFile(file, []byte(def.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	args[1] = file
	r := runSagactl(t, nil, args...)
	var rep report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != sagactl.ExitCompensated || rep.Status != "compensated" {
		t.Fatalf("--fail a with signals for later awaits: exit %d (want %d) %+v %v\n%s%s", r.code, sagactl.ExitCompensated, rep, err, r.stdout, r.stderr)
	}
}

// The local loop's state file "is trusted only while its lock is held"
// (local.go, localLockFile), by local down and by --local alike: with a
// state file a crashed `sagactl local` left behind, signal, callback and
// status --local refuse with "is `sagactl local` running in this
// directory?", rather than talk to whatever listens at its endpoints now,
// or give the SDK's "connection refused" retries when nothing does.
func TestLocalFlagDistrustsAStaleStateFile(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(filepath.Dir(sagactl.LocalStateFile), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"pid": 999999, "dynamodb_endpoint": "http://127.0.0.1:1", "sqs_endpoint": "http://127.0.0.1:1", "table": "t",
		"advance_queue_url": "http://127.0.0.1:1/q/a", "compensate_queue_url": "http://127.0.0.1:1/q/c"})
	if err := os.WriteFile(sagactl.LocalStateFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"signal", "s-1", "approved", "--local"}, {"status", "s-1", "--local"}} {
		r := runSagactl(t, nil, args...)
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "sagactl local") || strings.Contains(r.stderr, "connection refused") {
			t.Errorf("%v with a stale state file: exit %d\n%s", args, r.code, r.stderr)
		}
	}
}
