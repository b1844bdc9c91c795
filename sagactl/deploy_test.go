package sagactl_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

// sagactl deploy on the emulators: each definition and its child sagas
// deployed, then unchanged; start by name runs the deployed saga, an
// unknown name is named; start --signal starts once and signals every
// time, a repeat of its signal id a duplicate.
func TestDeployAndStartByNameOnEmulators(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	where := []string{"--table", b.Table, "--advance-queue-url", b.URLs[durable.QueueAdvance], "--compensate-queue-url", b.URLs[durable.QueueCompensate],
		"--dynamodb-endpoint", b.DynamoDBEndpoint, "--sqs-endpoint", b.SQSEndpoint}
	cmd := func(args ...string) result { return runSagactl(t, nil, append(args, where...)...) }

	r := cmd("deploy", expenseFile, "../examples/travel/travel.yaml")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != sagactl.ExitOK || len(lines) != 3 || !strings.HasPrefix(lines[0], "expense ") || !strings.HasSuffix(lines[0], " deployed") ||
		!strings.HasPrefix(lines[1], "travel ") || !strings.HasPrefix(lines[2], "payment ") || !strings.HasSuffix(lines[2], " deployed") {
		t.Fatalf("deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cmd("deploy", expenseFile, "--json")
	var ds []map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &ds); err != nil || len(ds) != 1 || ds[0]["saga"] != "expense" || ds[0]["result"] != "unchanged" || ds[0]["file"] != expenseFile {
		t.Fatalf("deploy again: %v %v\n%s", ds, err, r.stderr)
	}

	r = cmd("start", "expense", "--input", `{"amount": 12}`, "--id", "e-1")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "saga e-1 (expense): running, version 1") {
		t.Fatalf("start by name: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cmd("start", "nobody", "--id", "n-1")
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "saga nobody: no definition deployed") {
		t.Fatalf("start of an unknown name: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cmd("start", "expense", "--input", `{"amount": "twelve"}`, "--id", "e-9")
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "input.amount") || strings.Contains(r.stderr, "twelve") {
		t.Fatalf("start by name with a bad input: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	signal := []string{"start", "expense", "--input", `{"amount": 5}`, "--id", "e-2", "--signal", `approved={"by": "mia"}`, "--signal-id", "d-1"}
	r = cmd(signal...)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "saga e-2: started; signal approved: kept") {
		t.Fatalf("start --signal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cmd(append(signal, "--json")...)
	var rep struct {
		Started *bool  `json:"started"`
		Receipt string `json:"receipt"`
		Saga    struct {
			SagaID string `json:"saga_id"`
		} `json:"saga"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Started == nil || *rep.Started || rep.Receipt != "duplicate" || rep.Saga.SagaID != "e-2" {
		t.Fatalf("start --signal again: %+v %v\n%s", rep, err, r.stderr)
	}
	r = cmd("start", expenseFile, "--input", `{"amount": 5}`, "--id", "e-1", "--signal", "approved=@missing.json")
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "--signal approved: missing.json") {
		t.Fatalf("start --signal @FILE missing: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cmd("start", expenseFile, "--input", `{"amount": 7}`, "--id", "e-1", "--signal", `approved={"by": "mia"}`)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "saga e-1: existed already, not started again; signal approved: kept") {
		t.Fatalf("start --signal of an existing saga with another input: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// What start and deploy refuse before they reach a stack.
func TestStartAndDeployUsageErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"deploy"}, "deploy: name at least one definition file"},
		{[]string{"deploy", "missing.yaml"}, "missing.yaml"},
		{[]string{"start", "missing.yaml", "--id", "x-1"}, "missing.yaml"},
		{[]string{"start", "not a name", "--id", "x-1"}, "not a name"},
		{[]string{"start", "expense", "--signal", "approved={}"}, "a signal-with-start needs the saga's --id"},
		{[]string{"start", "expense", "--id", "x-1", "--signal", "approved={}", "--signal", "approved={}"}, "--signal at most once"},
		{[]string{"start", "expense", "--id", "x-1", "--signal", "approved"}, "--signal approved: write NAME=JSON or NAME=@FILE"},
		{[]string{"start", "expense", "--id", "x-1", "--signal-id", "d-1"}, "--signal-id goes with --signal"},
		{[]string{"start", expenseFile, "--input", `{"amount": 1}`, "--id", "x-1", "--signal", "paid={}"}, "--signal paid: saga expense awaits no signal of that name; its awaits take: approved"},
	} {
		r := runSagactl(t, nil, c.args...)
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

// Two files of one deploy that hold two different definitions of one saga
// name (a file's own, or a child saga it calls) are refused before
// anything is deployed: whichever went last would be current, and the
// report of the other would say "deployed" of a version that is not.
func TestDeployRefusesTwoDefinitionsOfOneName(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../examples/travel/payment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "payment.yaml")
	if err := os.WriteFile(other, bytes.Replace(src, []byte("timeout: 1h"), []byte("timeout: 2h"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"deploy", "../examples/travel/travel.yaml", other},
		{"deploy", other, "../examples/travel/travel.yaml"},
	} {
		r := runSagactl(t, nil, append(args, "--table", "t", "--advance-queue-url", "http://127.0.0.1:1/a", "--compensate-queue-url", "http://127.0.0.1:1/c")...)
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "two different definitions of saga payment") ||
			!strings.Contains(r.stderr, "travel.yaml") || !strings.Contains(r.stderr, other) {
			t.Errorf("%q: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
}
