package local_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/local"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
)

// queuedSaga is started, called back and signalled through the start
// queue: its reserve step waits on a callback token, then it awaits a
// signal.
var queuedSaga = []byte(`saga: queued
input: {order_id: string}
steps:
  - id: reserve
    action: inventory.reserve
    with: {order_id: "${input.order_id}", items: "${['mug']}"}
    callback: {timeout: 1h}
    out: reservation
    compensate:
      action: inventory.release
      with: {order_id: "${input.order_id}"}
  - id: approval
    await: {signal: approved, timeout: 1h}
    out: decision
  - id: done
    succeed: {output: "${{'by': vars.decision.by, 'tracking': vars.reservation.tracking}}"}
`)

// envPython names the Python with boto3 the test sends requests with
// (make e2e gives the SAM CLI's virtual environment's).
const envPython = "LAMBDASAGA_PYTHON"

// checkStartQueue: a service that is not written in Go starts a deployed
// saga, completes its callback and signals it with a Python script using
// boto3 alone (internal/startqueue/testdata/send.py), signing as the
// SagaSenderPolicy principal (the IAM check holds its calls to that
// policy: SendMessage on the start queue only); the advance function
// reads the start queue and the saga succeeds. A request the contract
// refuses lands in the start queue's dead-letter queue with its reason.
func checkStartQueue(t *testing.T, ctx context.Context, c *client.Client, env *local.Env, sq string) {
	t.Helper()
	python := os.Getenv(envPython)
	if python == "" {
		t.Errorf("%s is not set: the start queue is not tried from Python (make e2e sets it)", envPython)
		return
	}
	plan, err := saga.Compile("queued.yaml", queuedSaga, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Deploy(ctx, plan); err != nil {
		t.Fatal(err)
	}
	queueURL := env.QueueURLs["StartQueue"]
	send := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, python, append([]string{"../startqueue/testdata/send.py", queueURL}, args...)...)
		cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL_SQS="+sq, "AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
			"AWS_ACCESS_KEY_ID="+awslocal.SenderPrincipal, "AWS_SECRET_ACCESS_KEY=local")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("send.py %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	send("start", "queued", "e2e-queued", `{"order_id": "e2e-queued"}`)
	st := waitStarted(t, ctx, c, "e2e-queued", durable.StatusWaiting)
	qp, err := c.Plan(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	token := qp.CallbackToken(st)
	if token == "" {
		t.Fatalf("e2e-queued waits (v%d) with no callback token pending", st.Version)
	}
	send("callback", token, `{"order_id": "e2e-queued", "tracking": "1Z999"}`)
	for st.Cursors[0].Step == 0 {
		st = waitStarted(t, ctx, c, "e2e-queued", durable.StatusWaiting)
		time.Sleep(50 * time.Millisecond)
	}
	send("signal", "e2e-queued", "approved", `{"by": "py"}`, "e2e-queued-approval")
	st = waitFinal(t, ctx, c, "e2e-queued")
	if out, _ := st.Output.(map[string]any); st.Status != durable.StatusSucceeded || out["by"] != "py" || out["tracking"] != "1Z999" {
		t.Fatalf("e2e-queued: %s, output %v; want succeeded, approved by py, tracking 1Z999", st.Status, st.Output)
	}
	// Refused: a start of a saga nobody deployed, moved to the dead-letter
	// queue at once with the reason.
	send("start", "nosuch", "e2e-nosuch", `{}`)
	sqc := awslocal.SQS(sq)
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := sqc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(env.QueueURLs["StartDeadLetterQueue"]), WaitTimeSeconds: 2,
			MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) > 0 {
			m := out.Messages[0]
			reason := aws.ToString(m.MessageAttributes[startqueue.AttrReason].StringValue)
			if len(out.Messages) != 1 || !strings.Contains(aws.ToString(m.Body), `"nosuch"`) || !strings.Contains(reason, "nosuch") ||
				aws.ToString(m.MessageAttributes[startqueue.AttrSagaID].StringValue) != "e2e-nosuch" {
				t.Fatalf("start dead-letter queue: %d messages, first %s with reason %q", len(out.Messages), aws.ToString(m.Body), reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the refused start did not reach the start queue's dead-letter queue")
		}
	}
	if _, err := c.Status(ctx, "e2e-nosuch"); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("e2e-nosuch: %v, want not found", err)
	}
}

// waitStarted waits for a saga that a request in a queue starts, until it
// is in status want.
func waitStarted(t *testing.T, ctx context.Context, c *client.Client, id string, want durable.Status) *saga.State {
	t.Helper()
	for {
		st, err := c.Status(ctx, id)
		switch {
		case errors.Is(err, durable.ErrNotFound):
		case err != nil:
			t.Fatal(err)
		case st.Status == want:
			return st
		case st.Status.Final():
			t.Fatalf("saga %s is %s (%+v), want %s", id, st.Status, st.Failure, want)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("saga %s not %s in time", id, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
