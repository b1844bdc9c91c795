// Package sqsqueue is durable.Queue and durable.Receiver on Amazon SQS, and the
// glue for Lambda's SQS event source: decoding events.SQSMessage records and
// building the partial batch response. Like every adapter it imports only
// durable of this module, and no CEL.
package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/lambdasaga/lambdasaga/durable"
)

var (
	_ durable.Queue    = (*Queue)(nil)
	_ durable.Receiver = (*Queue)(nil)
)

// Message attributes set on every message, so operators can find a saga's
// messages without decoding bodies.
const (
	AttrSagaID  = "saga_id"
	AttrVersion = "version"
	AttrStep    = "step"
)

// Config sets up a Queue.
type Config struct {
	Client *sqs.Client // makes the SQS calls; required
	// URLs maps queue names (durable.QueueAdvance, durable.QueueCompensate,
	// and their durable.DeadLetter names for receiving) to queue URLs.
	URLs map[durable.QueueName]string
}

// Queue sends to and receives from SQS queues.
type Queue struct {
	client *sqs.Client
	urls   map[durable.QueueName]string
}

// New checks cfg and returns a queue.
func New(cfg Config) (*Queue, error) {
	if cfg.Client == nil {
		return nil, errors.New("sqs queue: a Client is required")
	}
	for _, q := range durable.QueueNames() {
		if cfg.URLs[q] == "" {
			return nil, fmt.Errorf("sqs queue: no URL for queue %q", q)
		}
	}
	return &Queue{client: cfg.Client, urls: cfg.URLs}, nil
}

func (q *Queue) url(name durable.QueueName) (string, error) {
	u, ok := q.urls[name]
	if !ok {
		return "", fmt.Errorf("sqs queue: no URL for queue %q", name)
	}
	return u, nil
}

// delaySeconds rounds a delay up to SQS's whole seconds: a message may
// come a little late, never early.
func delaySeconds(d time.Duration) (int32, error) {
	if d < 0 || d > durable.MaxDelay {
		return 0, fmt.Errorf("delay %s outside 0 to %s", d, durable.MaxDelay)
	}
	return int32(math.Ceil(d.Seconds())), nil
}

// Send implements durable.Queue, in batches of up to ten per queue.
func (q *Queue) Send(ctx context.Context, msgs []durable.Message) error {
	byQueue := map[durable.QueueName][]types.SendMessageBatchRequestEntry{}
	var order []durable.QueueName
	for i, m := range msgs {
		delay, err := delaySeconds(m.Delay)
		if err != nil {
			return fmt.Errorf("send to %s: saga %s: %w", m.Queue, m.SagaID, err)
		}
		if _, ok := byQueue[m.Queue]; !ok {
			order = append(order, m.Queue)
		}
		byQueue[m.Queue] = append(byQueue[m.Queue], types.SendMessageBatchRequestEntry{
			Id:           aws.String(strconv.Itoa(i)),
			MessageBody:  aws.String(string(durable.AppendMessage(nil, m))),
			DelaySeconds: delay,
			MessageAttributes: map[string]types.MessageAttributeValue{
				AttrSagaID:  {DataType: aws.String("String"), StringValue: aws.String(m.SagaID)},
				AttrVersion: {DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatUint(m.Version, 10))},
				AttrStep:    {DataType: aws.String("String"), StringValue: aws.String(m.Step)},
			},
		})
	}
	for _, name := range order {
		url, err := q.url(name)
		if err != nil {
			return err
		}
		entries := byQueue[name]
		for len(entries) > 0 {
			n := min(10, len(entries))
			if err := q.sendBatch(ctx, url, entries[:n]); err != nil {
				return fmt.Errorf("send to %s: %w", name, err)
			}
			entries = entries[n:]
		}
	}
	return nil
}

func (q *Queue) sendBatch(ctx context.Context, url string, entries []types.SendMessageBatchRequestEntry) error {
	if len(entries) == 1 {
		e := entries[0]
		_, err := q.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: e.MessageBody, DelaySeconds: e.DelaySeconds, MessageAttributes: e.MessageAttributes})
		return interpretError(err)
	}
	out, err := q.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
	if err != nil {
		return interpretError(err)
	}
	if len(out.Failed) > 0 {
		var why []string
		for _, f := range out.Failed {
			why = append(why, aws.ToString(f.Code)+": "+aws.ToString(f.Message))
		}
		return fmt.Errorf("%d of %d messages not sent (%s)", len(out.Failed), len(entries), strings.Join(why, "; "))
	}
	return nil
}

// SendBody puts a raw body on a queue, as a foreign producer would.
func (q *Queue) SendBody(ctx context.Context, name durable.QueueName, body []byte, delay time.Duration) error {
	url, err := q.url(name)
	if err != nil {
		return err
	}
	secs, err := delaySeconds(delay)
	if err != nil {
		return err
	}
	_, err = q.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(string(body)), DelaySeconds: secs})
	return interpretError(err)
}

// Receive implements durable.Receiver (for the local event-source poller and tests).
func (q *Queue) Receive(ctx context.Context, p *durable.ReceiveParams) ([]durable.Delivery, error) {
	url, err := q.url(p.Queue)
	if err != nil {
		return nil, err
	}
	if p.Max < 1 || p.Max > 10 {
		return nil, fmt.Errorf("receive from %s: max %d outside 1 to 10", p.Queue, p.Max)
	}
	in := &sqs.ReceiveMessageInput{
		QueueUrl: &url, MaxNumberOfMessages: int32(p.Max),
		WaitTimeSeconds:             int32(min(20, math.Ceil(p.Wait.Seconds()))),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	}
	if p.Visibility > 0 {
		in.VisibilityTimeout = int32(math.Ceil(p.Visibility.Seconds()))
	}
	out, err := q.client.ReceiveMessage(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", p.Queue, interpretError(err))
	}
	ds := make([]durable.Delivery, 0, len(out.Messages))
	for _, m := range out.Messages {
		count, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		ds = append(ds, durable.Delivery{Queue: p.Queue, MessageID: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: []byte(aws.ToString(m.Body)), ReceiveCount: count})
	}
	return ds, nil
}

// Delete implements durable.Receiver.
func (q *Queue) Delete(ctx context.Context, p *durable.DeleteParams) error {
	url, err := q.url(p.Queue)
	if err != nil {
		return err
	}
	_, err = q.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: &p.ReceiptHandle})
	var stale *types.ReceiptHandleIsInvalid
	if errors.As(err, &stale) {
		return nil // the message was received again, or is gone
	}
	return interpretError(err)
}

// ChangeVisibility makes a received message visible again after d (zero:
// at once), as Lambda's event source does with a failed record.
func (q *Queue) ChangeVisibility(ctx context.Context, name durable.QueueName, receipt string, d time.Duration) error {
	url, err := q.url(name)
	if err != nil {
		return err
	}
	_, err = q.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: &receipt, VisibilityTimeout: int32(math.Ceil(d.Seconds()))})
	return interpretError(err)
}

// interpretError translates SQS throttling into durable.ErrThrottled,
// keeping the SDK's error in the chain.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	var (
		throttled *types.RequestThrottled
		kms       *types.KmsThrottled
		ae        smithy.APIError
	)
	// ThrottlingException is the generic AWS error, which SQS has no type for.
	if errors.As(err, &throttled) || errors.As(err, &kms) || (errors.As(err, &ae) && ae.ErrorCode() == "ThrottlingException") {
		return fmt.Errorf("%w: %w", durable.ErrThrottled, err)
	}
	return err
}

// Record is one message of a Lambda SQS event, decoded.
type Record struct {
	MessageID string // the SQS message id; pass it to BatchResponse to report the record failed
	Body      []byte // the body as received
	// Message is the decoded body; zero when Err is set.
	Message durable.Message
	// Err wraps durable.ErrMalformedMessage for a body that is not a message:
	// report the record failed so it reaches the dead-letter queue untouched.
	Err          error
	ReceiveCount int // SQS's ApproximateReceiveCount: 1 on the first delivery, 0 when absent
}

// Records decodes the records of a Lambda SQS event.
func Records(ev events.SQSEvent) []Record {
	out := make([]Record, len(ev.Records))
	for i, r := range ev.Records {
		count, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
		out[i] = Record{MessageID: r.MessageId, Body: []byte(r.Body), ReceiveCount: count}
		out[i].Message, out[i].Err = durable.DecodeMessage(out[i].Body)
	}
	return out
}

// BatchResponse reports the records that failed, so Lambda deletes the rest
// and returns these to the queue (ReportBatchItemFailures).
func BatchResponse(failedMessageIDs []string) events.SQSEventResponse {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, id := range failedMessageIDs {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	return resp
}
