package sagactl_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga"
	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/frontdoor"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

const orderFile = "../examples/order/order.yaml"

type result struct {
	code           int
	stdout, stderr string
}

func runSagactl(t *testing.T, reg *engine.Registry, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	var actions *lambdasaga.Actions
	if reg != nil {
		actions = frontdoor.ActionsOf(reg).(*lambdasaga.Actions)
	}
	code := sagactl.Main(args, sagactl.Config{Actions: actions, Stdout: &out, Stderr: &errb})
	return result{code, out.String(), errb.String()}
}

// uniqueName is prefix and random hex: a table, or a queue prefix, of the
// test's own on the emulators, so that the tests there run in parallel.
func uniqueName(prefix string) string {
	var r [6]byte
	_, _ = rand.Read(r[:])
	return prefix + hex.EncodeToString(r[:])
}

type report struct {
	SagaID            string                       `json:"saga_id"`
	Status            string                       `json:"status"`
	Output            json.RawMessage              `json:"output"`
	Steps             []stepReport                 `json:"steps"`
	Compensations     []stepReport                 `json:"compensations"`
	Failure           *struct{ Step, Type string } `json:"failure"`
	CompensationError *struct{ Step, Type string } `json:"compensation_error"`
}

type stepReport struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
}

func ids(rs []stepReport) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID + ":" + r.Status
	}
	return out
}

func TestRunJSONShape(t *testing.T) {
	r := runSagactl(t, nil, "run", orderFile, "--input", "@../examples/order/testdata/ok.json", "--json", "--id", "o-1")
	if r.code != sagactl.ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, r.stdout)
	}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if strings.Join(keys, ",") != "compensations,output,saga_id,status,steps" {
		t.Fatalf("keys %v", keys)
	}
	var rep report
	_ = json.Unmarshal([]byte(r.stdout), &rep)
	want := []string{"reserve:completed", "price:completed", "charge:completed", "check:completed", "ship:completed", "done:completed"}
	if rep.SagaID != "o-1" || rep.Status != "succeeded" || !slices.Equal(ids(rep.Steps), want) || len(rep.Compensations) != 0 {
		t.Fatalf("report %+v", rep)
	}
	if rep.Steps[0].Attempts != 1 || !strings.Contains(string(rep.Output), `"order_id": "o-1001"`) {
		t.Fatalf("report %+v output %s", rep.Steps[0], rep.Output)
	}
}

// TestRunCompensatesInReverseAtEachStep fails each action step of the
// order saga in turn: exactly the completed steps are undone, newest first.
func TestRunCompensatesInReverseAtEachStep(t *testing.T) {
	tests := []struct {
		fail  string
		steps []string
		comps []string
	}{
		{"reserve", []string{"reserve:failed"}, []string{}},
		{"charge", []string{"reserve:completed", "price:completed", "charge:failed"}, []string{"reserve:compensated"}},
		{"ship", []string{"reserve:completed", "price:completed", "charge:completed", "check:completed", "ship:failed"}, []string{"charge:compensated", "reserve:compensated"}},
	}
	for _, tt := range tests {
		t.Run(tt.fail, func(t *testing.T) {
			r := runSagactl(t, nil, "run", orderFile, "--input", "@../examples/order/testdata/ok.json", "--fail", tt.fail, "--json")
			if r.code != sagactl.ExitCompensated {
				t.Fatalf("exit %d, want %d: %s", r.code, sagactl.ExitCompensated, r.stderr)
			}
			var rep report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Status != "compensated" || !slices.Equal(ids(rep.Steps), tt.steps) || !slices.Equal(ids(rep.Compensations), tt.comps) {
				t.Fatalf("status %s\nsteps %v\ncomps %v", rep.Status, ids(rep.Steps), ids(rep.Compensations))
			}
		})
	}
	t.Run("a failing compensation parks the saga", func(t *testing.T) {
		r := runSagactl(t, nil, "run", orderFile, "--input", "@../examples/order/testdata/ok.json", "--fail", "ship", "--fail", "charge.compensate", "--json")
		var rep report
		_ = json.Unmarshal([]byte(r.stdout), &rep)
		if r.code != sagactl.ExitCompensationFailed || rep.Status != "compensation_failed" || !slices.Equal(ids(rep.Compensations), []string{"charge:compensation_failed"}) {
			t.Fatalf("exit %d %+v", r.code, rep)
		}
		// Why it failed and why it parked are in the JSON, as in the text.
		if rep.Failure == nil || rep.Failure.Step != "ship" || rep.CompensationError == nil || rep.CompensationError.Step != "charge" {
			t.Fatalf("failure %+v, compensation error %+v", rep.Failure, rep.CompensationError)
		}
	})
}

func TestRunWithGoActions(t *testing.T) {
	svc := order.NewServices()
	actions := lambdasaga.NewActions()
	svc.Register(actions)
	r := runSagactl(t, frontdoor.Registry(actions), "run", orderFile, "--input", "@../examples/order/testdata/declined.json")
	if r.code != sagactl.ExitCompensated {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"charge             failed", "CardDeclined: the card was declined", "undo reserve       compensated", "compensated in"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("progress lacks %q:\n%s", want, r.stdout)
		}
	}
	if !slices.Equal(svc.Effects, []string{"reserve o-1002", "release o-1002"}) {
		t.Fatalf("effects %v", svc.Effects)
	}
}

func TestBadInputGetsOneClearMessage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte("{oops"), 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "missing.yaml", "--input", "{}"}, "definition missing.yaml: no such file or directory"},
		{[]string{"run", orderFile, "--input", "{nope"}, "--input: not valid JSON"},
		{[]string{"run", orderFile, "--input", "@" + bad}, "--input @" + bad + ": not valid JSON"},
		{[]string{"run", orderFile, "--input", "[1]"}, "--input: must be a JSON object"},
		{[]string{"run", orderFile, "--input", "@nowhere.json"}, "--input: nowhere.json: no such file or directory"},
		{[]string{"run", orderFile, "--input", `{"order_id": 5}`}, "input.order_id: want string, got an int"},
		{[]string{"run", orderFile, "--colour"}, "run: flag provided but not defined: -colour"},
		{[]string{"sweep", "--idle-for", "-1s", "--local"}, "sweep: --idle-for must not be negative"},
		{[]string{"local", "--visibility", "-5s"}, "local: --visibility and --schedule-every must not be negative"},
		{[]string{"local", "--schedule-every", "-1s"}, "local: --visibility and --schedule-every must not be negative"},
		{[]string{"run", orderFile, "--input", "{}", "--fail", "nosuch"}, "--fail nosuch: saga order has no action step or compensation by that name; " +
			"--fail takes one of: reserve, reserve.compensate, charge, charge.compensate, ship, ship.compensate\n"},
		{[]string{"plan", orderFile, "--fail", "price.compensate"}, "--fail price.compensate: step price is a set step"},
		{[]string{"cost", orderFile, "--fail", "ship.undo"}, "--fail ship.undo: saga order has no action step or compensation by that name"},
		{[]string{"run", orderFile, "--input", "{}", "--fail", "price"}, "step price is a set step"},
		{[]string{"run", orderFile, "--input", "{}", "--fail", "check"}, "step check is an assert step"},
		{[]string{"run", "../internal/saga/testdata/invalid/vars.yaml"}, "vars.yaml: 3 problem(s)"},
		{[]string{"run"}, "run: name exactly one definition file (got 0)"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"plan", orderFile}, "plan: say which step fails with --fail STEP"},
		{[]string{"validate"}, "validate: name at least one definition file"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runSagactl(t, nil, tt.args...)
			if r.code != sagactl.ExitUsage {
				t.Fatalf("exit %d, want %d", r.code, sagactl.ExitUsage)
			}
			if !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("stderr %q does not say %q", r.stderr, tt.want)
			}
			if strings.Contains(r.stderr, "goroutine") || strings.Contains(r.stderr, "panic") {
				t.Fatalf("stack trace on stderr: %s", r.stderr)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	r := runSagactl(t, nil, "validate", orderFile, "../internal/saga/testdata/valid/loop.yaml")
	if r.code != sagactl.ExitOK || strings.Count(r.stdout, ": ok (saga ") != 2 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "validate", orderFile, "../internal/saga/testdata/invalid/mixed.yaml")
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stdout, "order.yaml: ok") || !strings.Contains(r.stderr, `mixed.yaml:8:5: step reserve: next: no step has id "chrage"`) {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestGraph(t *testing.T) {
	r := runSagactl(t, nil, "graph", orderFile)
	if r.code != sagactl.ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"flowchart TD\n",
		"    start((start)) --> s0\n",
		"    s0[\"reserve<br/>inventory.reserve\"]\n",
		"    s0 -.->|compensate| u0\n",
		"    u2[/\"undo charge<br/>payments.refund\"/]\n",
		"    s3 -->|false| compensate\n",
		"    s5 --> succeeded\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("graph lacks %q", want)
		}
	}
	r = runSagactl(t, nil, "graph", "../internal/saga/testdata/valid/order.yaml")
	if !strings.Contains(r.stdout, `s1 -->|"input.amount #gt; 1000.0"| s2`) || !strings.Contains(r.stdout, "s1 -->|default| s3") {
		t.Fatalf("switch edges missing:\n%s", r.stdout)
	}
}

func TestPlan(t *testing.T) {
	r := runSagactl(t, nil, "plan", orderFile, "--fail", "ship")
	want := "if step ship fails for good (path: reserve -> price -> charge -> check -> ship), compensation runs:\n" +
		"  1. undo charge: payments.refund\n  2. undo reserve: inventory.release\nthe saga ends compensated\n"
	if r.code != sagactl.ExitOK || r.stdout != want {
		t.Fatalf("exit %d\n%s\nwant\n%s%s", r.code, r.stdout, want, r.stderr)
	}
	r = runSagactl(t, nil, "plan", "../internal/saga/testdata/valid/order.yaml", "--fail", "review.x")
	if r.code != sagactl.ExitUsage {
		t.Fatalf("bad step accepted: %s", r.stdout)
	}
	// A failure at the first step has nothing completed to undo.
	r = runSagactl(t, nil, "plan", "../internal/saga/testdata/valid/loop.yaml", "--fail", "poll", "--input", `{"job": "j"}`)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "nothing is compensated") {
		t.Fatalf("exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunOnEmulators runs the order saga with sagactl against dynalite and fauxqs.
func TestRunOnEmulators(t *testing.T) {
	t.Parallel()
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sq := awslocal.Endpoint(t, awslocal.EnvSQS)
	table := uniqueName("sagactl-")
	for _, tc := range []struct {
		fail   []string
		code   int
		status string
		comps  []string
	}{
		{nil, sagactl.ExitOK, "succeeded", []string{}},
		{[]string{"--fail", "ship"}, sagactl.ExitCompensated, "compensated", []string{"charge:compensated", "reserve:compensated"}},
	} {
		args := append([]string{"run", orderFile, "--input", "@../examples/order/testdata/ok.json", "--json",
			"--dynamodb-endpoint", dyn, "--sqs-endpoint", sq, "--table", table, "--queue-prefix", table + "-"}, tc.fail...)
		r := runSagactl(t, nil, args...)
		var rep report
		_ = json.Unmarshal([]byte(r.stdout), &rep)
		if r.code != tc.code || rep.Status != tc.status || !slices.Equal(ids(rep.Compensations), tc.comps) {
			t.Fatalf("%v: exit %d %+v\n%s", tc.fail, r.code, rep, r.stderr)
		}
	}
	r := runSagactl(t, nil, "run", orderFile, "--input", "{}", "--dynamodb-endpoint", dyn)
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "--dynamodb-endpoint and --sqs-endpoint go together") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}

func TestStartStatusCancelOnEmulators(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	where := []string{"--table", b.Table, "--advance-queue-url", b.URLs[durable.QueueAdvance], "--compensate-queue-url", b.URLs[durable.QueueCompensate],
		"--dynamodb-endpoint", b.DynamoDBEndpoint, "--sqs-endpoint", b.SQSEndpoint}
	r := runSagactl(t, nil, append([]string{"start", orderFile, "--input", "@../examples/order/testdata/ok.json", "--id", "sagactl-1"}, where...)...)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "saga sagactl-1 (order): running, version 1") || !strings.Contains(r.stdout, "waiting on: reserve (attempt 1)") {
		t.Fatalf("start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, append([]string{"status", "sagactl-1", "--json"}, where...)...)
	var st map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st["status"] != "running" || st["pending"] != "reserve" {
		t.Fatalf("status: %v %v\n%s", st, err, r.stderr)
	}
	// reserve is pending (nothing handles messages here): the cancel waits
	// for its outcome.
	r = runSagactl(t, nil, append([]string{"cancel", "sagactl-1"}, where...)...)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "running") || !strings.Contains(r.stdout, "cancel requested: compensates once reserve has an outcome") {
		t.Fatalf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, append([]string{"sweep", "--idle-for", "0s"}, where...)...)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "sweep: 1 sagas in their status for 0s or more checked, 1 idle had their messages sent again") {
		t.Fatalf("sweep: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The saga does not move (nothing handles messages here): a sweep
	// that allows one re-send per version leaves it for an operator, and
	// status says so.
	r = runSagactl(t, nil, append([]string{"sweep", "--idle-for", "0s", "--max-resends", "1"}, where...)...)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "0 idle had their messages sent again") || !strings.Contains(r.stdout, "1 idle sagas left for an operator") {
		t.Fatalf("second sweep: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, append([]string{"status", "sagactl-1"}, where...)...)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "the sweep sent this version's messages again (once) without progress") {
		t.Fatalf("status after the sweeps: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A saga the sweep cannot read: it says what it did, then names it, and fails.
	at := time.Now().Add(-time.Hour)
	if err := b.Store.SagaCreate(context.Background(), &durable.SagaCreateParams{Record: durable.SagaRecord{SagaID: "damaged", Version: 1,
		Status: durable.StatusRunning, Name: "order", DefinitionHash: "h", CreatedAt: at, StatusSince: at, UpdatedAt: at, State: []byte{0xff}}}); err != nil {
		t.Fatal(err)
	}
	r = runSagactl(t, nil, append([]string{"sweep", "--idle-for", "0s"}, where...)...)
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stdout, "2 sagas in their status for 0s or more checked") || !strings.Contains(r.stderr, "saga damaged") {
		t.Fatalf("sweep past a damaged saga: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, append([]string{"status", "missing"}, where...)...)
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "saga missing: not found") {
		t.Fatalf("missing: exit %d %s", r.code, r.stderr)
	}
}

func TestStartNeedsALocation(t *testing.T) {
	r := runSagactl(t, nil, "start", orderFile, "--input", "@../examples/order/testdata/ok.json")
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "--local, or --table, --advance-queue-url and --compensate-queue-url") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}

// The README's example definition must stay valid.
func TestReadmeExampleValidates(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```yaml\n")
	if !ok {
		t.Fatal("no yaml block in README.md")
	}
	def, _, _ := strings.Cut(rest, "```")
	if _, err := saga.Compile("README.md", []byte(def), saga.Options{}); err != nil {
		t.Fatalf("README example: %v", err)
	}
}
