package sagactl_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
	"github.com/lambdasaga/lambdasaga/sagactl"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

func TestRedriveRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"redrive", "--queue", "advance,nosuch", "--local"}, `redrive --queue: no queue "nosuch" (advance, compensate, start)`},
		{[]string{"redrive", "--max", "-1", "--local"}, "redrive: --max must not be negative"},
		{[]string{"redrive", "extra", "--local"}, "redrive: unexpected arguments [extra]"},
	} {
		r := runSagactl(t, nil, tc.args...)
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

// A stack on the emulators whose dead-letter queues hold letters: a dry
// run counts them; --max moves that many; a redrive moves the rest back,
// leaving the start queue's refused requests and listing their reasons;
// --include-refused moves those too. Every letter is counted in one queue
// or the other at each step.
func TestRedriveMovesDeadLettersBackOnTheEmulators(t *testing.T) {
	t.Parallel()
	where := workWhere(t)
	table, prefix := where[5], where[7]
	ctx := t.Context()
	if err := dynamo.CreateTable(ctx, awslocal.DynamoDB(where[1]), table); err != nil {
		t.Fatal(err)
	}
	sq := awslocal.SQS(where[3])
	urls, err := sqsqueue.CreateQueues(ctx, sq, sqsqueue.QueueSpec{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	start, err := startqueue.CreateQueues(ctx, sq, prefix, 5, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	queueURL := map[string]string{"advance": urls[durable.QueueAdvance], "advance-dlq": urls[durable.DeadLetter(durable.QueueAdvance)],
		"compensate": urls[durable.QueueCompensate], "compensate-dlq": urls[durable.DeadLetter(durable.QueueCompensate)], "start": start.Start, "start-dlq": start.DeadLetter}
	put := func(queue, body, reason string) {
		in := &sqs.SendMessageInput{QueueUrl: aws.String(queueURL[queue]), MessageBody: aws.String(body)}
		if reason != "" {
			in.MessageAttributes = map[string]types.MessageAttributeValue{startqueue.AttrReason: {DataType: aws.String("String"), StringValue: aws.String(reason)}}
		}
		if _, err := sq.SendMessage(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 {
		put("advance-dlq", fmt.Sprintf(`{"saga_id":"s-%d"}`, i), "")
	}
	put("compensate-dlq", `{"saga_id":"c-1"}`, "")
	put("start-dlq", `{"start":{"saga":"order","id":"o-1","input":{}}}`, "")
	put("start-dlq", `{"start":{"saga":"nosuch","id":"o-2","input":{}}}`, `saga "nosuch" is not deployed`)
	put("start-dlq", `{"start":{"saga":"nosuch","id":"o-3","input":{}}}`, `saga "nosuch" is not deployed`)
	counts := func() map[string]int {
		out := map[string]int{}
		for q, u := range queueURL {
			a, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: []types.QueueAttributeName{"All"}})
			if err != nil {
				t.Fatal(err)
			}
			var v, f int
			fmt.Sscan(a.Attributes["ApproximateNumberOfMessages"], &v)
			fmt.Sscan(a.Attributes["ApproximateNumberOfMessagesNotVisible"], &f)
			out[q] = v + f
		}
		return out
	}
	check := func(step string, want map[string]int) {
		t.Helper()
		got := counts()
		for q, n := range want {
			if got[q] != n {
				t.Errorf("%s: %s holds %d, want %d (all: %v)", step, q, got[q], n, got)
			}
		}
	}
	redriveRun := func(args ...string) string {
		t.Helper()
		r := runSagactl(t, nil, append(append([]string{"redrive"}, args...), where...)...)
		if r.code != sagactl.ExitOK {
			t.Fatalf("redrive %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}

	out := redriveRun("--dry-run")
	for _, want := range []string{"advance: 12 dead letters\n", "compensate: 1 dead letter\n", "start: 3 dead letters\n", "dry run: nothing moved"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	check("dry run", map[string]int{"advance-dlq": 12, "advance": 0})

	out = redriveRun("--max", "5", "--queue", "advance")
	if !strings.Contains(out, "5 moved back (one at a time)") || strings.Contains(out, "compensate") {
		t.Errorf("--max 5 --queue advance:\n%s", out)
	}
	check("--max 5", map[string]int{"advance-dlq": 7, "advance": 5, "compensate-dlq": 1})

	out = redriveRun()
	for _, want := range []string{
		"advance: 7 dead letters\n  7 moved back (one at a time: the queue service has no message move task)",
		"compensate: 1 dead letter\n  1 moved back",
		"start: 3 dead letters\n  1 moved back (one at a time)\n  2 refused left in the dead-letter queue (--include-refused moves them)\n  refusal reasons:\n         2  saga \"nosuch\" is not deployed\n",
		"9 moved back in all",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("redrive lacks %q:\n%s", want, out)
		}
	}
	check("redrive", map[string]int{"advance-dlq": 0, "advance": 12, "compensate-dlq": 0, "compensate": 1, "start-dlq": 2, "start": 1})

	var rep struct {
		Moved  int
		Queues []struct {
			Queue   string
			Moved   int
			Reasons []struct{ Reason string }
		}
	}
	if err := json.Unmarshal([]byte(redriveRun("--queue", "start", "--include-refused", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Moved != 2 || len(rep.Queues) != 1 || rep.Queues[0].Queue != "start" || len(rep.Queues[0].Reasons) != 1 {
		t.Errorf("--include-refused --json: %+v", rep)
	}
	check("--include-refused", map[string]int{"start-dlq": 0, "start": 3})
}
