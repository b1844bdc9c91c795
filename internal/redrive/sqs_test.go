package redrive_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/redrive"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
)

// sqsRig is a stack's queues of the test's own on the SQS emulator.
type sqsRig struct {
	sq   *sqs.Client // the harness's
	urls map[string]string
	find *redrive.SQSQueues
}

func newSQSRig(t testing.TB) *sqsRig {
	t.Helper()
	ep := awslocal.Endpoint(t, awslocal.EnvSQS)
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "rd-" + hex.EncodeToString(b[:]) + "-"
	sq := awslocal.SQS(ep)
	urls, err := sqsqueue.CreateQueues(t.Context(), sq, sqsqueue.QueueSpec{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	start, err := startqueue.CreateQueues(t.Context(), sq, prefix, 5, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := &sqsRig{sq: sq, urls: map[string]string{"start": start.Start, "start-dlq": start.DeadLetter}}
	for q, u := range urls {
		r.urls[string(q)] = u
	}
	// As sagactl finds them: the source queues by name, their dead-letter
	// queues by their redrive policies; called as the operator.
	r.find = &redrive.SQSQueues{Client: awslocal.SQSAs(awslocal.OperatorPrincipal, ep), Names: map[redrive.Queue]string{}}
	for _, q := range redrive.Queues() {
		r.find.Names[q] = prefix + string(q)
	}
	return r
}

// put sends n bodies prefix-i to queue, each with a saga_id attribute,
// and a reason when reason is not empty.
func (r *sqsRig) put(t *testing.T, queue, prefix string, n int, reason string) {
	t.Helper()
	for i := range n {
		attrs := map[string]types.MessageAttributeValue{sqsqueue.AttrSagaID: {DataType: aws.String("String"), StringValue: aws.String(fmt.Sprintf("s-%d", i))}}
		if reason != "" {
			attrs[startqueue.AttrReason] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(reason)}
		}
		if _, err := r.sq.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(r.urls[queue]), MessageBody: aws.String(fmt.Sprintf("%s-%d", prefix, i)), MessageAttributes: attrs}); err != nil {
			t.Fatal(err)
		}
	}
}

// count is a queue's messages, visible and in flight.
func (r *sqsRig) count(t *testing.T, queue string) (visible, inFlight int) {
	t.Helper()
	out, err := r.sq.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(r.urls[queue]), AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Sscan(out.Attributes["ApproximateNumberOfMessages"], &visible)
	fmt.Sscan(out.Attributes["ApproximateNumberOfMessagesNotVisible"], &inFlight)
	return visible, inFlight
}

// drain receives every visible message of queue, and returns their
// bodies sorted, each checked for its saga_id attribute.
func (r *sqsRig) drain(t *testing.T, queue string) []string {
	t.Helper()
	var bodies []string
	for {
		out, err := r.sq.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(r.urls[queue]), MaxNumberOfMessages: 10, VisibilityTimeout: 60, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			slices.Sort(bodies)
			return bodies
		}
		for _, m := range out.Messages {
			if !strings.HasPrefix(aws.ToString(m.MessageAttributes[sqsqueue.AttrSagaID].StringValue), "s-") {
				t.Errorf("%s: %s lost its attributes: %v", queue, aws.ToString(m.Body), m.MessageAttributes)
			}
			bodies = append(bodies, aws.ToString(m.Body))
		}
	}
}

func (r *sqsRig) sources(t testing.TB, queues ...redrive.Queue) []redrive.Source {
	t.Helper()
	srcs, missing, err := r.find.Sources(t.Context(), queues)
	if err != nil || len(missing) > 0 {
		t.Fatalf("sources: missing %v: %v", missing, err)
	}
	return srcs
}

// On fauxqs, which has no message move task, every dead-letter queue is
// found by its source's redrive policy and moved one letter at a time,
// attributes kept; the start queue's refused requests stay, counted by
// reason, and are visible again at once.
func TestSQSRedriveOnTheEmulator(t *testing.T) {
	t.Parallel()
	r := newSQSRig(t)
	r.put(t, "advance-dlq", "a", 13, "")
	r.put(t, "compensate-dlq", "c", 2, "")
	r.put(t, "start-dlq", "s", 2, "")
	r.put(t, "start-dlq", "unknown", 3, `unknown saga "x"`)
	r.put(t, "start-dlq", "input", 1, "input: amount: want a double")

	dry := redrive.Redrive(t.Context(), r.sources(t), with(fast, func(p *redrive.Params) { p.DryRun = true }))
	if dry.Err() != nil || dry.Moved != 0 || len(dry.Queues) != 3 || dry.Queues[0].Before.Visible != 13 || dry.Queues[2].Before.Visible != 6 {
		t.Fatalf("dry run: %+v: %v", dry, dry.Err())
	}
	if v, _ := r.count(t, "advance-dlq"); v != 13 {
		t.Fatalf("a dry run moved letters: %d left", v)
	}

	res := redrive.Redrive(t.Context(), r.sources(t), fast)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	a, c, s := res.Queues[0], res.Queues[1], res.Queues[2]
	if a.Moved != 13 || !a.Unsupported || a.ByTask || c.Moved != 2 || s.Moved != 2 || s.Skipped != 4 || res.Moved != 17 {
		t.Fatalf("advance %+v\ncompensate %+v\nstart %+v", a, c, s)
	}
	if want := []redrive.ReasonCount{{Reason: `unknown saga "x"`, Count: 3}, {Reason: "input: amount: want a double", Count: 1}}; !slices.Equal(s.Reasons, want) {
		t.Errorf("reasons %v, want %v", s.Reasons, want)
	}
	if got := r.drain(t, "advance"); !slices.Equal(got, names("a", 13)) {
		t.Errorf("advance holds %v", got)
	}
	if got := r.drain(t, "compensate"); !slices.Equal(got, names("c", 2)) {
		t.Errorf("compensate holds %v", got)
	}
	if got := r.drain(t, "start"); !slices.Equal(got, names("s", 2)) {
		t.Errorf("start holds %v", got)
	}
	for q, want := range map[string]int{"advance-dlq": 0, "compensate-dlq": 0, "start-dlq": 4} {
		if v, f := r.count(t, q); v != want || f != 0 {
			t.Errorf("%s: %d visible, %d in flight; want %d visible", q, v, f, want)
		}
	}
	res = redrive.Redrive(t.Context(), r.sources(t, redrive.Start), with(fast, func(p *redrive.Params) { p.IncludeRefused = true; p.Max = 3 }))
	if res.Err() != nil || res.Moved != 3 || res.Queues[0].Skipped != 0 {
		t.Fatalf("with refused ones: %+v: %v", res.Queues[0], res.Err())
	}
	if v, _ := r.count(t, "start-dlq"); v != 1 {
		t.Errorf("start-dlq holds %d after moving 3 of 4", v)
	}
}

// A redrive killed between a batch's send and its delete leaves that
// batch in both queues; run again once they are visible, it moves the
// rest, and every letter is on its queue, the batch twice.
func TestSQSRedriveCrashThenRerunLosesNothing(t *testing.T) {
	t.Parallel()
	r := newSQSRig(t)
	r.put(t, "advance-dlq", "a", 25, "")
	srcs := r.sources(t, redrive.Advance)
	srcs[0].Letters = &crashing{DeadLetters: srcs[0].Letters}
	const vis = 2 * time.Second
	res := redrive.Redrive(t.Context(), srcs, with(fast, func(p *redrive.Params) { p.Visibility = vis }))
	if res.Err() == nil || res.Moved != 20 {
		t.Fatalf("crashed run: moved %d: %v", res.Moved, res.Err())
	}
	if v, f := r.count(t, "advance-dlq"); v != 5 || f != 10 {
		t.Fatalf("after the crash the dead-letter queue shows %d, %d in flight; want 5 and 10", v, f)
	}
	if v, _ := r.count(t, "advance"); v != 20 {
		t.Fatalf("after the crash advance holds %d, want 20", v)
	}
	time.Sleep(vis + 500*time.Millisecond)
	res = redrive.Redrive(context.Background(), r.sources(t, redrive.Advance), fast)
	if res.Err() != nil || res.Moved != 15 {
		t.Fatalf("re-run: moved %d: %v", res.Moved, res.Err())
	}
	got := r.drain(t, "advance")
	if len(got) != 35 || !slices.Equal(slices.Compact(got), names("a", 25)) {
		t.Fatalf("advance holds %d letters, %d distinct", len(got), len(slices.Compact(got)))
	}
	if v, f := r.count(t, "advance-dlq"); v != 0 || f != 0 {
		t.Errorf("dead-letter queue still holds %d, %d in flight", v, f)
	}
}

// countingSQS counts the requests a redrive makes.
type countingSQS struct {
	redrive.SQSClient
	n atomic.Int64
}

func (c *countingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	c.n.Add(1)
	return c.SQSClient.ReceiveMessage(ctx, in, opts...)
}

func (c *countingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.n.Add(1)
	return c.SQSClient.SendMessageBatch(ctx, in, opts...)
}

func (c *countingSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	c.n.Add(1)
	return c.SQSClient.SendMessage(ctx, in, opts...)
}

func (c *countingSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	c.n.Add(1)
	return c.SQSClient.DeleteMessageBatch(ctx, in, opts...)
}

// BenchmarkSQSRedrive moves b.N work messages back one batch at a time on
// the emulator, and reports the SQS requests a letter took (the move, the
// final empty receive included) and letters a second.
func BenchmarkSQSRedrive(b *testing.B) {
	r := newSQSRig(b)
	body := `{"saga_id":"s-1","version":3,"queue":"advance","step":"charge","attempt":1}`
	for i := 0; i < b.N; i += 10 {
		var es []types.SendMessageBatchRequestEntry
		for j := range min(10, b.N-i) {
			es = append(es, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(j)), MessageBody: aws.String(body)})
		}
		if _, err := r.sq.SendMessageBatch(b.Context(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(r.urls["advance-dlq"]), Entries: es}); err != nil {
			b.Fatal(err)
		}
	}
	srcs := r.sources(b, redrive.Advance)
	dl := srcs[0].Letters.(*redrive.SQSDeadLetters)
	counter := &countingSQS{SQSClient: dl.Client}
	dl.Client = counter
	b.ReportAllocs()
	b.ResetTimer()
	res := redrive.Redrive(b.Context(), srcs, redrive.Params{Max: b.N}) // bounded: one batch at a time, no final wait
	b.StopTimer()
	if res.Err() != nil || res.Moved != b.N {
		b.Fatalf("moved %d of %d: %v", res.Moved, b.N, res.Err())
	}
	b.ReportMetric(float64(counter.n.Load())/float64(b.N), "requests/letter")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "letters/s")
}
