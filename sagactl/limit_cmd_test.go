package sagactl_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

func TestLimitSetListUnsetOnEmulators(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	where := []string{"--table", b.Table, "--advance-queue-url", b.URLs[durable.QueueAdvance], "--compensate-queue-url", b.URLs[durable.QueueCompensate],
		"--dynamodb-endpoint", b.DynamoDBEndpoint, "--sqs-endpoint", b.SQSEndpoint}
	run := func(args ...string) (string, string, int) {
		r := runSagactl(t, nil, append(args, where...)...)
		return r.stdout, r.stderr, r.code
	}
	if out, errOut, code := run("limit", "set", "payments.charge", "--rate", "50/s", "--concurrency", "5"); code != sagactl.ExitOK || !strings.Contains(out, "limit of payments.charge set: 50 calls/s (5 per 100ms window), 5 at once") {
		t.Fatalf("set: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := run("limit", "set", "lambda:ship", "--concurrency", "2"); code != sagactl.ExitOK {
		t.Fatalf("set: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := run("limit", "set", "payments.charge", "--rate", "5000/s"); code != sagactl.ExitUsage || !strings.Contains(errOut, "over the 500/s one DynamoDB key takes") {
		t.Fatalf("a rate over one key's: exit %d\n%s", code, errOut)
	}
	if _, errOut, code := run("limit", "set", "payments.charge"); code != sagactl.ExitUsage || !strings.Contains(errOut, "a rate or a concurrency is required") {
		t.Fatalf("set without a limit: exit %d\n%s", code, errOut)
	}
	out, errOut, code := run("limit", "list")
	want := "ACTION           LIMIT\nlambda:ship      2 at once\npayments.charge  50 calls/s (5 per 100ms window), 5 at once\n"
	if code != sagactl.ExitOK || out != want {
		t.Fatalf("list: exit %d\n%s%s\nwant\n%s", code, out, errOut, want)
	}
	if out, errOut, code := run("limit", "list", "--json"); code != sagactl.ExitOK || !strings.Contains(out, `"window_ms": 100`) {
		t.Fatalf("list --json: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := run("limit", "unset", "lambda:ship"); code != sagactl.ExitOK || !strings.Contains(out, "limit of lambda:ship unset") {
		t.Fatalf("unset: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := run("limit", "unset", "lambda:ship"); code != sagactl.ExitUsage || !strings.Contains(errOut, "lambda:ship has no limit") {
		t.Fatalf("unset again: exit %d\n%s", code, errOut)
	}
}
