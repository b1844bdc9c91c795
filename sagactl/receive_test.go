package sagactl_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

const (
	expenseFile = "../internal/saga/testdata/valid/expense.yaml"
	chargeFile  = "../internal/saga/testdata/valid/charge.yaml"
)

// sagactl signal and callback on the emulators, with an embedded runtime
// on the same table and queues standing in for the deployed functions:
// status shows each pause, each receipt is named, and each refusal is a
// clear error that echoes neither a payload nor a whole token.
func TestSignalAndCallbackOnEmulators(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		return map[string]any{"id": c.Step + "-" + c.SagaID}, nil
	})
	rt, err := embedded.Start(embedded.Config{Actions: reg, Store: b.Store, Queue: b.Queue, Receiver: b.Queue, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	where := []string{"--table", b.Table, "--advance-queue-url", b.URLs[durable.QueueAdvance], "--compensate-queue-url", b.URLs[durable.QueueCompensate],
		"--dynamodb-endpoint", b.DynamoDBEndpoint, "--sqs-endpoint", b.SQSEndpoint}
	cmd := func(args ...string) result { return runSagactl(t, nil, append(args, where...)...) }
	waitFor := func(id string, want durable.Status) {
		t.Helper()
		for range 2000 {
			if st, err := rt.Coordinator.Get(context.Background(), id); err == nil && st.Status == want {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("saga %s never %s", id, want)
	}

	if r := cmd("start", expenseFile, "--input", `{"amount": 12}`, "--id", "e-1"); r.code != sagactl.ExitOK {
		t.Fatalf("start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitFor("e-1", durable.StatusWaiting)
	r := cmd("status", "e-1")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "paused: await signal approved (step approval) until ") || strings.Contains(r.stdout, "token") {
		t.Fatalf("status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cmd("signal", "e-1", "approved", "--payload", `{"by": "ann"}`, "--id", "mail-1")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "signal approved to saga e-1: applied") || !strings.Contains(r.stdout, "saga e-1 (expense): running") {
		t.Fatalf("signal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cmd("signal", "e-1", "approved", "--payload", `{"by": "bob"}`, "--id", "mail-1", "--json")
	var rep struct {
		Receipt string
		Saga    struct {
			SagaID string `json:"saga_id"`
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != sagactl.ExitOK || rep.Receipt != "duplicate" || rep.Saga.SagaID != "e-1" {
		t.Fatalf("the same signal again: exit %d %+v %v\n%s%s", r.code, rep, err, r.stdout, r.stderr)
	}
	waitFor("e-1", durable.StatusSucceeded)

	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte(`{"note": "`+strings.Repeat("secret", 6000)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"signal", "e-1", "approved"}, "saga e-1 is succeeded: signal approved not taken (a saga that compensates or has ended takes no signals or callbacks)"},
		{[]string{"signal", "nobody", "approved"}, "signal approved to saga nobody: "},
		{[]string{"signal", "e-1", "approved", "--payload", "@" + big}, "over the limit of 32768"},
		{[]string{"signal", "e-1", "approved", "--payload", `{"secret": tru}`}, "--payload: not valid JSON (at byte"},
		{[]string{"signal", "e-1", "no way"}, `signal name "no way"`},
		{[]string{"signal", "e-1"}, "name the saga id and the signal's name"},
	} {
		r := cmd(tc.args...)
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "secret") {
			t.Errorf("%v: exit %d, want %q in:\n%s", tc.args, r.code, tc.want, r.stderr)
		}
	}
	if r := cmd("signal", "nobody", "approved"); !strings.Contains(r.stderr, "saga nobody: not found") {
		t.Errorf("unknown saga: %s", r.stderr)
	}

	// A signal during a wait, before its await: kept, and counted by status.
	later := filepath.Join(t.TempDir(), "later.yaml")
	if err := os.WriteFile(later, []byte("saga: later\nsteps:\n  - {id: cool, wait: {for: 1h}}\n  - {id: approval, await: {signal: approved}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cmd("start", later, "--id", "l-1"); r.code != sagactl.ExitOK {
		t.Fatalf("start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitFor("l-1", durable.StatusWaiting)
	r = cmd("signal", "l-1", "approved")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "signal approved to saga l-1: kept: no await waits on it yet") ||
		!strings.Contains(r.stdout, "paused: wait (step cool) until ") || !strings.Contains(r.stdout, "kept signals: 1, for awaits to come") {
		t.Fatalf("signal during a wait: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A callback: status shows its token, which completes it.
	if r := cmd("start", chargeFile, "--input", `{"amount": 700}`, "--id", "c-1"); r.code != sagactl.ExitOK {
		t.Fatalf("start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitFor("c-1", durable.StatusWaiting)
	token := pausedToken(t, cmd("status", "c-1"))
	r = cmd("callback", token[:len(token)-3]+"AAA", "--output", `{"id": "forged"}`)
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "invalid callback token: saga c-1 issued no such token") || strings.Contains(r.stderr, token[:30]) {
		t.Fatalf("a tampered token: exit %d\n%s", r.code, r.stderr)
	}
	r = cmd("callback", token, "--output", `{"id": "pay-1"}`)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "callback of step charge (attempt 1) of saga c-1: applied: completed") {
		t.Fatalf("callback: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cmd("callback", token, "--output", `{"id": "pay-2"}`)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "duplicate: this token was completed already") {
		t.Fatalf("callback again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitFor("c-1", durable.StatusSucceeded)
	if st, _ := rt.Coordinator.Get(context.Background(), "c-1"); st.Vars["payment"].(map[string]any)["id"] != "pay-1" {
		t.Fatalf("payment %v", st.Vars["payment"])
	}

	// A failed callback retries the step, with a new token.
	if r := cmd("start", chargeFile, "--input", `{"amount": 800}`, "--id", "c-2"); r.code != sagactl.ExitOK {
		t.Fatal(r.stderr)
	}
	waitFor("c-2", durable.StatusWaiting)
	first := pausedToken(t, cmd("status", "c-2"))
	r = cmd("callback", first, "--error", "Declined", "--message", "insufficient funds")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "callback of step charge (attempt 1) of saga c-2: applied: failed with Declined") {
		t.Fatalf("fail: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	time.Sleep(1500 * time.Millisecond) // the retry's backoff, 1s
	waitFor("c-2", durable.StatusWaiting)
	r = cmd("status", "c-2")
	if second := pausedToken(t, r); second == first || !strings.Contains(r.stdout, "callback of step charge attempt 2 until") {
		t.Fatalf("the retry:\n%s", r.stdout)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"callback", first}, "say how the work ended"},
		{[]string{"callback", first, "--output", "{}", "--error", "X"}, "say how the work ended"},
		{[]string{"callback", first, "--output", "{}", "--message", "m"}, "--message goes with --error"},
		{[]string{"callback", "lscb1_nonsense!", "--output", "{}"}, "invalid callback token: it is not base64url"},
	} {
		r := cmd(tc.args...)
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, want %q in:\n%s", tc.args, r.code, tc.want, r.stderr)
		}
	}
}

// pausedToken is the callback token status prints.
func pausedToken(t *testing.T, r result) string {
	t.Helper()
	_, rest, ok := strings.Cut(r.stdout, "  token: ")
	if r.code != sagactl.ExitOK || !ok || !strings.Contains(r.stdout, "paused: callback of step charge") {
		t.Fatalf("status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	token, _, _ := strings.Cut(rest, "\n")
	return token
}

// run --signal sends its signals after the saga has started, one by one.
// When a step before the awaits fails (--fail), the saga compensates while
// the signals are still being sent, and the next one is refused
// (ErrNotReceiving): run still reports the saga's outcome and exits 2
// (compensated), not 1, a usage error. In memory the window is short; on
// the emulators, where each signal is a round trip, it is hit every time
// from the third signal on.
func TestRunSignalsAfterAFailingStepOnEmulators(t *testing.T) {
	t.Parallel()
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sq := awslocal.Endpoint(t, awslocal.EnvSQS)
	table := uniqueName("sagactl-payload-edges-")
	var def strings.Builder
	def.WriteString("saga: manyawaits\nsteps:\n  - {id: a, action: svc.a}\n")
	args := []string{"run", "", "--fail", "a", "--json", "--dynamodb-endpoint", dyn, "--sqs-endpoint", sq, "--table", table, "--queue-prefix", table + "-"}
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
