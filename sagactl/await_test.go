package sagactl_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

const (
	expenseExample = "../examples/expense/expense.yaml"
	claimInput     = "@../examples/expense/testdata/claim.json"
	webhookExample = "../examples/order/order-webhook.yaml"
)

// sagactl run --signal sends as the saga starts: the await takes it. With
// no signal, the await waits its 72 hours in virtual time, and the report
// says it timed out; a rejection compensates.
func TestRunSignals(t *testing.T) {
	r := runSagactl(t, nil, "run", expenseExample, "--input", claimInput, "--signal", "approved=@../examples/expense/testdata/approved.json")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "  signal approved    ") || !strings.Contains(r.stdout, `"outcome":"paid"`) ||
		strings.Contains(r.stdout, "virtual time") {
		t.Fatalf("approved: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "run", expenseExample, "--input", claimInput)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "approval           caught                Timeout: no signal approved within 72h") ||
		!strings.Contains(r.stdout, "await approval got no signal approved: it timed out after 72h") || !strings.Contains(r.stdout, `"outcome":"escalated"`) ||
		!strings.Contains(r.stdout, "72h0m0s in all, passed at once") {
		t.Fatalf("no signal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "run", expenseExample, "--input", claimInput, "--signal", `approved={"approved": false, "by": "maria"}`, "--json")
	var rep struct {
		report
		Signals []struct{ Name, Receipt string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != sagactl.ExitCompensated || rep.Status != "compensated" ||
		len(rep.Signals) != 1 || rep.Signals[0].Name != "approved" || (rep.Signals[0].Receipt != "kept" && rep.Signals[0].Receipt != "applied") {
		t.Fatalf("rejected: exit %d %+v %v\n%s%s", r.code, rep, err, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		signal, want string
	}{
		{"approval={}", "--signal approval: saga expense awaits no signal of that name; its awaits take: approved"},
		{"approved", "--signal approved: write NAME=JSON or NAME=@FILE"},
		{`approved={"secret": }`, "--signal approved: not valid JSON (at byte"},
		{`approved="` + strings.Repeat("secret", 6000) + `"`, "over the limit of 32768"},
	} {
		r := runSagactl(t, nil, "run", expenseExample, "--input", claimInput, "--signal", tc.signal)
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "secret") || strings.Contains(r.stdout, "started") {
			t.Errorf("--signal %.30s: exit %d, want %q in:\n%s%s", tc.signal, r.code, tc.want, r.stdout, r.stderr)
		}
	}
}

// In sagactl run, a simulated action of a callback step completes its
// token with its input, and the saga goes on; --fail fails the action, and
// what was done before it is compensated.
func TestRunCompletesSimulatedCallbacks(t *testing.T) {
	r := runSagactl(t, nil, "run", webhookExample, "--input", "@../examples/order/testdata/ok.json", "--json")
	var rep report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != sagactl.ExitOK || rep.Status != "succeeded" {
		t.Fatalf("exit %d %+v %v\n%s", r.code, rep, err, r.stderr)
	}
	r = runSagactl(t, nil, "run", webhookExample, "--input", "@../examples/order/testdata/ok.json", "--fail", "charge", "--json")
	rep = report{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != sagactl.ExitCompensated || strings.Join(ids(rep.Compensations), ",") != "reserve:compensated" {
		t.Fatalf("--fail charge: exit %d %+v %v\n%s", r.code, rep, err, r.stderr)
	}
}

// graph draws an await as a pause with its signal and timeout, its catch
// in place of a timeout's failure; a callback on its action; plan says
// what it assumed of the callback.
func TestGraphAndPlanShowAwaitsAndCallbacks(t *testing.T) {
	r := runSagactl(t, nil, "graph", expenseExample)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, `s1>"approval<br/>await signal approved, 72h"]`) ||
		!strings.Contains(r.stdout, `s1 -->|"catch Timeout"| s5`) || strings.Contains(r.stdout, "s1 -->|times out| compensate") {
		t.Fatalf("graph: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "graph", webhookExample)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, `s2["charge<br/>payments.request_charge<br/>then waits for its callback, 1h"]`) {
		t.Fatalf("graph: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "plan", webhookExample, "--fail", "ship")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "(path: reserve -> price -> charge -> check -> ship)") || !strings.Contains(r.stdout, "1. undo charge: payments.refund") || !strings.Contains(r.stdout, "the callback of charge is completed with its action's output") {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// On the emulators, run sends --signal as the saga starts and completes
// simulated callbacks, as in memory.
func TestRunSignalsAndCallbacksOnEmulators(t *testing.T) {
	t.Parallel()
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sq := awslocal.Endpoint(t, awslocal.EnvSQS)
	table := uniqueName("sagactl-await-")
	where := []string{"--dynamodb-endpoint", dyn, "--sqs-endpoint", sq, "--table", table, "--queue-prefix", table + "-", "--json"}
	r := runSagactl(t, nil, append([]string{"run", expenseExample, "--input", claimInput, "--signal", `approved={"approved": true, "by": "maria"}`}, where...)...)
	var rep report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != sagactl.ExitOK || !strings.Contains(strings.Join(strings.Fields(string(rep.Output)), ""), `"outcome":"paid"`) {
		t.Fatalf("expense: exit %d %+v %v\n%s", r.code, rep, err, r.stderr)
	}
	r = runSagactl(t, nil, append([]string{"run", webhookExample, "--input", "@../examples/order/testdata/ok.json"}, where...)...)
	rep = report{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != sagactl.ExitOK || rep.Status != "succeeded" {
		t.Fatalf("order-webhook: exit %d %+v %v\n%s", r.code, rep, err, r.stderr)
	}
}
