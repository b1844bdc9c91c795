package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdasaga/lambdasaga/client"
	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/local"
	"github.com/lambdasaga/lambdasaga/saga"
)

// syncBuffer collects the functions' logs from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestE2E runs the order saga through the real Lambda binaries under
// aws-lambda-rie, on dynalite and fauxqs, with resources made from
// infra/template.yaml (make e2e).
func TestE2E(t *testing.T) {
	if os.Getenv("LAMBDASAGA_E2E") == "" {
		t.Skip("LAMBDASAGA_E2E is not set: run make e2e")
	}
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sq := awslocal.Endpoint(t, awslocal.EnvSQS)
	dir := t.TempDir()
	rie := filepath.Join(dir, "aws-lambda-rie")
	if err := local.BuildRIE(context.Background(), rie); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fn := "../../examples/order/cmd/orderfn"
	env, err := local.Up(ctx, local.Config{
		Template: "../../infra/template.yaml", DynamoDBEndpoint: dyn, SQSEndpoint: sq, RIE: rie, BuildDir: dir,
		Mains:   map[string]string{"AdvanceFunction": fn, "CompensateFunction": fn},
		Workers: 2, Visibility: 2 * time.Second, Prefix: "e2e-", Log: logs,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Down()
	defer func() {
		if t.Failed() {
			t.Logf("function logs:\n%s", logs.String())
		}
	}()
	c, err := client.NewAWS(client.AWSConfig{AWS: awslocal.Config(), Table: env.Table, AdvanceQueueURL: env.QueueURLs["AdvanceQueue"],
		CompensateQueueURL: env.QueueURLs["CompensateQueue"], DynamoDBEndpoint: dyn, SQSEndpoint: sq})
	if err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		id, input string
		status    durable.Status
		failure   string
	}{
		{"e2e-ok", "ok.json", durable.StatusSucceeded, ""},
		{"e2e-declined", "declined.json", durable.StatusCompensated, "charge CardDeclined"},
		{"e2e-unshippable", "unshippable.json", durable.StatusCompensated, "ship Unshippable"},
	}
	for _, r := range runs {
		raw, err := os.ReadFile("../../examples/order/testdata/" + r.input)
		if err != nil {
			t.Fatal(err)
		}
		var in map[string]any
		_ = json.Unmarshal(raw, &in)
		if _, err := c.Start(ctx, client.StartParams{File: "order.yaml", Definition: order.Definition, SagaID: r.id, Input: in}); err != nil {
			t.Fatal(err)
		}
	}
	// Poison: a body that is no message. It must reach the dead-letter queue as it was.
	poison := `{"v":1,"saga_id": "broken` + " \u2603"
	sqc := awslocal.SQS(sq)
	if _, err := sqc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(env.QueueURLs["AdvanceQueue"]), MessageBody: aws.String(poison)}); err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		st := waitFinal(t, ctx, c, r.id)
		got := ""
		if st.Failure != nil {
			got = st.Failure.Step + " " + st.Failure.Type
		}
		if st.Status != r.status || got != r.failure {
			t.Errorf("%s: %s %q, want %s %q", r.id, st.Status, got, r.status, r.failure)
		}
	}
	// The unshippable order was undone newest first: refund, then release.
	re := regexp.MustCompile(`^CompensateFunction/\d: .*message="message handled".*saga_id=e2e-unshippable step=(\w+) .*outcome=step`)
	var undone []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			undone = append(undone, m[1])
		}
	}
	if !slices.Equal(undone, []string{"charge", "reserve"}) {
		t.Errorf("compensations ran %v, want [charge reserve]", undone)
	}
	// Poison in the dead-letter queue, body intact (after maxReceiveCount receives, 2s apart).
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := sqc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(env.QueueURLs["AdvanceDeadLetterQueue"]), WaitTimeSeconds: 2, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) > 0 {
			if len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != poison {
				t.Fatalf("dead-letter queue holds %d messages, first %q; want the poison body", len(out.Messages), aws.ToString(out.Messages[0].Body))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the poison message did not reach the dead-letter queue")
		}
	}
}

func waitFinal(t *testing.T, ctx context.Context, c *client.Client, id string) *saga.State {
	t.Helper()
	for {
		st, err := c.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status.Final() {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("saga %s still %s", id, st.Status)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
