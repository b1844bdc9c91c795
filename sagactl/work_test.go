package sagactl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

// workWhere is the endpoint flags of a table and queues of the test's own
// on the emulators.
func workWhere(t *testing.T) []string {
	t.Helper()
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sq := awslocal.Endpoint(t, awslocal.EnvSQS)
	table := uniqueName("w-")
	return []string{"--dynamodb-endpoint", dyn, "--sqs-endpoint", sq, "--table", table, "--queue-prefix", table + "-"}
}

// leaveWaiting runs an expense claim on the emulators until --timeout,
// which leaves it waiting on its approval, and signals it: nothing reads
// the queues, so it stays there until something works them.
func leaveWaiting(t *testing.T, where []string, id, payload string) {
	t.Helper()
	r := runSagactl(t, nil, append([]string{"run", expenseExample, "--input", claimInput, "--id", id, "--timeout", "3s"}, where...)...)
	if r.code != sagactl.ExitStillRunning {
		t.Fatalf("run: exit %d, want %d\n%s%s", r.code, sagactl.ExitStillRunning, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, append([]string{"signal", id, "approved", "--payload", payload}, where...)...)
	if r.code != sagactl.ExitOK {
		t.Fatalf("signal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func sagaStatus(t *testing.T, where []string, id string) string {
	t.Helper()
	r := runSagactl(t, nil, append([]string{"status", id, "--json"}, where...)...)
	var st struct{ Status string }
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status %s: exit %d %v\n%s%s", id, r.code, err, r.stdout, r.stderr)
	}
	return st.Status
}

// A saga that run left on the emulators at --timeout, and that was
// signalled since, is moved on by work: it handles the signal's message,
// runs the steps after the await, prints each, and says at the end how
// many messages it handled and how the saga ended.
func TestWorkMovesOnASagaRunLeftWaiting(t *testing.T) {
	t.Parallel()
	where := workWhere(t)
	leaveWaiting(t, where, "e-1", `{"approved": true, "by": "maria"}`)
	if st := sagaStatus(t, where, "e-1"); st != "running" && st != "waiting" {
		t.Fatalf("before work: e-1 is %s", st)
	}

	r := runSagactl(t, nil, append([]string{"work", "--for", "4s"}, where...)...)
	if r.code != sagactl.ExitOK {
		t.Fatalf("work: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"saga e-1 (expense)\n", "  pay ", "  paid ", "work: stopped after 4s; ", " handled; 1 saga ended: e-1 succeeded\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("work's output lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	if st := sagaStatus(t, where, "e-1"); st != "succeeded" {
		t.Errorf("after work: e-1 is %s, want succeeded", st)
	}
}

// --fail makes a step, or a step's compensation, fail for good in any
// saga that runs it, matched by step id; work ends on SIGINT (or SIGTERM)
// with its summary. Not parallel: the SIGINT it sends this process would
// stop every other test's work too.
// Not parallel: it sends SIGINT to the whole test process.
func TestWorkFailsWhatFailNamesAndStopsOnInterrupt(t *testing.T) {
	where := workWhere(t)
	leaveWaiting(t, where, "e-2", `{"approved": true, "by": "maria"}`)

	out := &lockedBuffer{}
	var errb bytes.Buffer
	done := make(chan int)
	go func() {
		done <- sagactl.Main(append([]string{"work", "--fail", "pay", "--fail", "file.compensate"}, where...), sagactl.Config{Stdout: out, Stderr: &errb})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for sagaStatus(t, where, "e-2") != "compensation_failed" {
		if time.Now().After(deadline) {
			t.Fatalf("e-2 did not park in 30s:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The handler is in place once work has said it runs.
	if !strings.Contains(out.String(), "until SIGINT or SIGTERM") {
		t.Fatalf("work did not say it runs:\n%s", out.String())
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var code int
	select {
	case code = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("work still running 10s after SIGINT:\n%s", out.String())
	}
	if code != sagactl.ExitOK {
		t.Fatalf("work: exit %d\n%s%s", code, out.String(), errb.String())
	}
	for _, want := range []string{
		"  pay                failed               attempt 1",
		"SimulatedFailure: step pay failed (--fail)",
		"  undo file          compensation_failed  attempt 1",
		"SimulatedFailure: compensation of step file failed (--fail)",
		"work: stopped on SIGINT after ",
		" handled; 1 saga ended: e-2 compensation_failed\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("work's output lacks %q:\n%s%s", want, out.String(), errb.String())
		}
	}
}

// work runs on a table and queues that are there: a missing one means the
// endpoints or names are wrong, and work says which, creating nothing.
func TestWorkRefusesAMissingTableOrQueue(t *testing.T) {
	t.Parallel()
	where := workWhere(t)
	dyn, sq := where[1], where[3]
	r := runSagactl(t, nil, "work", "--dynamodb-endpoint", dyn, "--sqs-endpoint", sq, "--table", "nosuch-work", "--for", "1s")
	if r.code != sagactl.ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, "--dynamodb-endpoint "+dyn+": no table nosuch-work there") {
		t.Errorf("missing table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// run makes the table and queues; a prefix naming none is refused.
	leaveWaiting(t, where, "e-3", `{"approved": true, "by": "maria"}`)
	r = runSagactl(t, nil, "work", "--dynamodb-endpoint", dyn, "--sqs-endpoint", sq, "--table", where[5], "--queue-prefix", "nosuch-work-", "--for", "1s")
	if r.code != sagactl.ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, "--sqs-endpoint "+sq+": no queue nosuch-work-advance there") {
		t.Errorf("missing queue: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "work", "--dynamodb-endpoint", dyn, "--sqs-endpoint", sq, "--table", "nosuch-work", "--for", "1s")
	if r.code != sagactl.ExitUsage {
		t.Errorf("work created table nosuch-work: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// work's flags are checked before it reaches anything: both endpoints,
// a positive --for, a --fail that can name a step, no arguments. No
// emulator needed.
func TestWorkRefusesBadFlags(t *testing.T) {
	t.Parallel()
	down := "http://127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"work"}, "work: --dynamodb-endpoint and --sqs-endpoint are required"},
		{[]string{"work", "--dynamodb-endpoint", down}, "work: --dynamodb-endpoint and --sqs-endpoint are required"},
		{[]string{"work", "--sqs-endpoint", down}, "work: --dynamodb-endpoint and --sqs-endpoint are required"},
		{[]string{"work", "--dynamodb-endpoint", down, "--sqs-endpoint", down, "--for", "0s"}, "work: --for must be positive"},
		{[]string{"work", "--dynamodb-endpoint", down, "--sqs-endpoint", down, "--for", "-1m"}, "work: --for must be positive"},
		{[]string{"work", "--dynamodb-endpoint", down, "--sqs-endpoint", down, "--for", "soon"}, `invalid value "soon" for flag -for`},
		{[]string{"work", "--dynamodb-endpoint", down, "--sqs-endpoint", down, "--fail", ""}, "work: --fail: name a step id, or STEP.compensate"},
		{[]string{"work", "--dynamodb-endpoint", down, "--sqs-endpoint", down, "--fail", ".compensate"}, "work: --fail: name a step id, or STEP.compensate"},
		{[]string{"work", "e-1", "--dynamodb-endpoint", down, "--sqs-endpoint", down}, "work: unexpected arguments [e-1]"},
		{[]string{"work", "--dynamodb-endpoint", down, "--sqs-endpoint", down}, "--dynamodb-endpoint " + down + ": nothing answers there"},
	} {
		r := runSagactl(t, nil, tc.args...)
		if r.code != sagactl.ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, want %q in stderr:\n%s", tc.args, r.code, r.stdout, tc.want, r.stderr)
		}
	}
	help := runSagactl(t, nil, "work", "--help")
	for _, want := range []string{"Usage: sagactl work --dynamodb-endpoint URL --sqs-endpoint URL", "by step id in whatever saga runs it", "-for", "must exist"} {
		if help.code != sagactl.ExitOK || !strings.Contains(help.stdout, want) {
			t.Errorf("work --help: exit %d, lacks %q:\n%s", help.code, want, help.stdout)
		}
	}
	if strings.Contains(help.stdout, "created if missing") {
		t.Errorf("work --help says work creates what is missing:\n%s", help.stdout)
	}
}

// lockedBuffer is a bytes.Buffer a command writes to while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// work reads the start queue that run made beside the work queues: a
// request sent as raw JSON (as any service sends it) starts a saga
// deployed by name and delivers its signal; a request the contract
// refuses goes to the start queue's dead-letter queue with its reason.
func TestWorkCarriesOutStartQueueRequests(t *testing.T) {
	t.Parallel()
	where := workWhere(t)
	leaveWaiting(t, where, "e-1", `{"approved": true, "by": "maria"}`)
	if r := runSagactl(t, nil, append([]string{"deploy", expenseExample}, where...)...); r.code != sagactl.ExitOK {
		t.Fatalf("deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	sq := awslocal.SQS(awslocal.Endpoint(t, awslocal.EnvSQS))
	prefix := where[len(where)-1]
	ctx := context.Background()
	urls, err := startqueue.FindQueues(ctx, sq, prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"start": {"saga": "expense", "id": "e-2", "input": {"claim_id": "x-2", "employee": "ada", "cents": 900}}, "signal": {"name": "approved", "payload": {"approved": true, "by": "bo"}}}`,
		`{"start": {"saga": "expense", "id": "e-3", "inputs": {}}}`,
	} {
		if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(urls.Start), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	r := runSagactl(t, nil, append([]string{"work", "--for", "5s"}, where...)...)
	if r.code != sagactl.ExitOK {
		t.Fatalf("work: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The signal is kept or applied, as the saga's first step and the
	// delivery race.
	for _, want := range []string{"request signal-with-start e-2: done (", "\nrequest: refused, moved to the dead-letter queue: request: start.inputs: unknown field",
		"2 start queue requests (1 refused)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("work's output lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	if st := sagaStatus(t, where, "e-2"); st != "succeeded" {
		t.Errorf("after work: e-2 is %s, want succeeded", st)
	}
	out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(urls.DeadLetter), WaitTimeSeconds: 1, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 || !strings.Contains(aws.ToString(out.Messages[0].Body), `"e-3"`) ||
		!strings.Contains(aws.ToString(out.Messages[0].MessageAttributes[startqueue.AttrReason].StringValue), "start.inputs") {
		t.Fatalf("start dead-letter queue: %d messages %+v", len(out.Messages), out.Messages)
	}
}
