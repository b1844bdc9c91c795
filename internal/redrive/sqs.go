package redrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// ReasonAttribute is the message attribute that carries a refusal reason
// (internal/startqueue's AttrReason).
const ReasonAttribute = "lambdasaga-reason"

// SQSClient is the part of *sqs.Client a redrive uses.
type SQSClient interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, opts ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, opts ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
	CancelMessageMoveTask(ctx context.Context, in *sqs.CancelMessageMoveTaskInput, opts ...func(*sqs.Options)) (*sqs.CancelMessageMoveTaskOutput, error)
}

var (
	_ DeadLetters = (*SQSDeadLetters)(nil)
	_ Mover       = (*SQSDeadLetters)(nil)
	_ Finder      = (*SQSQueues)(nil)
)

// SQSQueues finds a stack's dead-letter queues on SQS: each source
// queue's RedrivePolicy names its dead-letter queue.
type SQSQueues struct {
	Client SQSClient
	// URLs are the source queues' URLs (the stack's outputs
	// AdvanceQueueUrl, CompensateQueueUrl, StartQueueUrl).
	URLs map[Queue]string
	// Names are the source queues looked up by name where URLs has none
	// (the emulators': prefix+"advance", ...). A name no queue has is a
	// queue the stack lacks.
	Names map[Queue]string
}

// SQSStack is the SQSQueues of a stack's outputs: the advance and
// compensate queues, and the start queue when startURL is not empty.
func SQSStack(client SQSClient, advanceURL, compensateURL, startURL string) *SQSQueues {
	f := &SQSQueues{Client: client, URLs: map[Queue]string{Advance: advanceURL, Compensate: compensateURL}}
	if startURL != "" {
		f.URLs[Start] = startURL
	}
	return f
}

// Sources implements Finder.
func (f *SQSQueues) Sources(ctx context.Context, queues []Queue) ([]Source, []Queue, error) {
	var (
		out     []Source
		missing []Queue
	)
	for _, q := range asked(queues) {
		url := f.URLs[q]
		if url == "" && f.Names[q] != "" {
			o, err := f.Client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(f.Names[q])})
			var none *types.QueueDoesNotExist
			switch {
			case errors.As(err, &none):
			case err != nil:
				return nil, nil, fmt.Errorf("queue %s: %w", f.Names[q], err)
			default:
				url = aws.ToString(o.QueueUrl)
			}
		}
		if url == "" {
			missing = append(missing, q)
			continue
		}
		dl, err := f.deadLetters(ctx, url)
		if err != nil {
			return nil, nil, fmt.Errorf("%s queue: %w", q, err)
		}
		out = append(out, Source{Queue: q, Letters: dl})
	}
	return out, missing, nil
}

// deadLetters reads a source queue's RedrivePolicy and finds its
// dead-letter queue by the name in its ARN.
func (f *SQSQueues) deadLetters(ctx context.Context, sourceURL string) (*SQSDeadLetters, error) {
	out, err := f.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(sourceURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn, types.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		return nil, err
	}
	var policy struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	}
	if err := json.Unmarshal([]byte(out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]), &policy); err != nil || policy.DeadLetterTargetArn == "" {
		return nil, fmt.Errorf("%s has no dead-letter queue (no RedrivePolicy)", sourceURL)
	}
	// arn:aws:sqs:REGION:ACCOUNT:NAME
	parts := strings.Split(policy.DeadLetterTargetArn, ":")
	if len(parts) != 6 {
		return nil, fmt.Errorf("%s: dead-letter queue ARN %q is not a queue's", sourceURL, policy.DeadLetterTargetArn)
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(parts[5])}
	if parts[4] != "" {
		in.QueueOwnerAWSAccountId = aws.String(parts[4])
	}
	u, err := f.Client.GetQueueUrl(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("dead-letter queue %s: %w", parts[5], err)
	}
	return &SQSDeadLetters{Client: f.Client, URL: aws.ToString(u.QueueUrl), ARN: policy.DeadLetterTargetArn,
		SourceURL: sourceURL, SourceARN: out.Attributes[string(types.QueueAttributeNameQueueArn)]}, nil
}

// SQSDeadLetters is a dead-letter queue on SQS and its source queue.
type SQSDeadLetters struct {
	Client         SQSClient
	URL, ARN       string // the dead-letter queue
	SourceURL      string // where its letters go back
	SourceARN      string // the same, for a move task
	MovesPerSecond int    // a move task's rate; 0: as fast as SQS goes
}

// Depth implements DeadLetters.
func (d *SQSDeadLetters) Depth(ctx context.Context) (Depth, error) {
	out, err := d.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(d.URL), AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return Depth{}, err
	}
	vis, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return Depth{Visible: vis, InFlight: inFlight}, nil
}

// Receive implements DeadLetters.
func (d *SQSDeadLetters) Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]Letter, error) {
	out, err := d.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(d.URL), MaxNumberOfMessages: int32(max),
		VisibilityTimeout: int32(math.Ceil(visibility.Seconds())), WaitTimeSeconds: int32(min(20, math.Ceil(wait.Seconds()))),
		MessageAttributeNames: []string{"All"}})
	if err != nil {
		return nil, err
	}
	letters := make([]Letter, 0, len(out.Messages))
	for _, m := range out.Messages {
		l := Letter{ID: aws.ToString(m.MessageId), Receipt: aws.ToString(m.ReceiptHandle), Body: []byte(aws.ToString(m.Body))}
		if len(m.MessageAttributes) > 0 {
			l.Attributes = m.MessageAttributes
			if r, ok := m.MessageAttributes[ReasonAttribute]; ok {
				l.Reason = aws.ToString(r.StringValue)
			}
		}
		letters = append(letters, l)
	}
	return letters, nil
}

// maxBatchBytes keeps a SendMessageBatch under the smallest batch limit
// SQS has had (256 KiB, bodies and attributes together); a larger letter
// goes alone.
const maxBatchBytes = 256 << 10

// Return implements DeadLetters: in batches, each letter's body and
// attributes as received. No delay is asked, so the source queue's own
// (none on the stack's queues) applies.
func (d *SQSDeadLetters) Return(ctx context.Context, letters []Letter) ([]Letter, error) {
	var sent []Letter
	for len(letters) > 0 {
		n, size := 0, 0
		for n < len(letters) && n < 10 {
			s := letterBytes(letters[n])
			if n > 0 && size+s > maxBatchBytes {
				break
			}
			n, size = n+1, size+s
		}
		batch := letters[:n]
		letters = letters[n:]
		if n == 1 {
			l := batch[0]
			attrs, _ := l.Attributes.(map[string]types.MessageAttributeValue)
			if _, err := d.Client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(d.SourceURL), MessageBody: aws.String(string(l.Body)), MessageAttributes: attrs}); err != nil {
				return sent, err
			}
			sent = append(sent, l)
			continue
		}
		entries := make([]types.SendMessageBatchRequestEntry, n)
		for i, l := range batch {
			attrs, _ := l.Attributes.(map[string]types.MessageAttributeValue)
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(l.Body)), MessageAttributes: attrs}
		}
		out, err := d.Client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(d.SourceURL), Entries: entries})
		if err != nil {
			return sent, err
		}
		for _, ok := range out.Successful {
			if i, err := strconv.Atoi(aws.ToString(ok.Id)); err == nil && i < n {
				sent = append(sent, batch[i])
			}
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return sent, fmt.Errorf("%d of %d letters not sent (%s: %s)", len(out.Failed), n, aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	return sent, nil
}

// letterBytes is what a letter counts toward a batch's size.
func letterBytes(l Letter) int {
	n := len(l.Body)
	attrs, _ := l.Attributes.(map[string]types.MessageAttributeValue)
	for k, v := range attrs {
		n += len(k) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	return n
}

// Delete implements DeadLetters.
func (d *SQSDeadLetters) Delete(ctx context.Context, letters []Letter) error {
	for batch := range slices.Chunk(letters, 10) {
		var entries []types.DeleteMessageBatchRequestEntry
		for j, l := range batch {
			entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: aws.String(l.Receipt)})
		}
		out, err := d.Client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(d.URL), Entries: entries})
		if err != nil {
			return err
		}
		for _, f := range out.Failed {
			if aws.ToString(f.Code) != "ReceiptHandleIsInvalid" {
				return fmt.Errorf("%d of %d not deleted (%s: %s)", len(out.Failed), len(batch), aws.ToString(f.Code), aws.ToString(f.Message))
			}
		}
	}
	return nil
}

// Release implements DeadLetters.
func (d *SQSDeadLetters) Release(ctx context.Context, letters []Letter) error {
	for batch := range slices.Chunk(letters, 10) {
		var entries []types.ChangeMessageVisibilityBatchRequestEntry
		for j, l := range batch {
			entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: aws.String(l.Receipt)})
		}
		if _, err := d.Client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(d.URL), Entries: entries}); err != nil {
			return err
		}
	}
	return nil
}

// StartMove implements Mover with StartMessageMoveTask, to the source
// queue by its ARN (a letter the function sent to the dead-letter queue
// itself has no source SQS knows).
func (d *SQSDeadLetters) StartMove(ctx context.Context) (string, error) {
	if d.ARN == "" || d.SourceARN == "" {
		return "", fmt.Errorf("no queue ARNs: %w", ErrUnsupported)
	}
	in := &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(d.ARN), DestinationArn: aws.String(d.SourceARN)}
	if d.MovesPerSecond > 0 {
		in.MaxNumberOfMessagesPerSecond = aws.Int32(int32(d.MovesPerSecond))
	}
	out, err := d.Client.StartMessageMoveTask(ctx, in)
	if err != nil {
		if unsupported(err) {
			return "", fmt.Errorf("%w: %w", ErrUnsupported, err)
		}
		return "", err
	}
	return aws.ToString(out.TaskHandle), nil
}

// unsupported reports whether err says the service has no move task:
// an emulator that does not know the action (fauxqs answers
// InvalidAction), or one that says it does not support it.
func unsupported(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "InvalidAction", "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation", "NotImplemented", "UnknownOperationException":
		return true
	}
	return false
}

// MoveStatus implements Mover with ListMessageMoveTasks: the task of
// handle while it runs, else the most recent (SQS names only running
// tasks by handle).
func (d *SQSDeadLetters) MoveStatus(ctx context.Context, handle string) (MoveStatus, error) {
	out, err := d.Client.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(d.ARN), MaxResults: aws.Int32(10)})
	if err != nil {
		return MoveStatus{}, err
	}
	if len(out.Results) == 0 {
		return MoveStatus{}, errors.New("SQS lists no move task of the dead-letter queue")
	}
	r := out.Results[0]
	for _, x := range out.Results {
		if aws.ToString(x.TaskHandle) == handle {
			r = x
		}
	}
	st := MoveStatus{Status: aws.ToString(r.Status), Moved: int(r.ApproximateNumberOfMessagesMoved), Failure: aws.ToString(r.FailureReason)}
	if r.ApproximateNumberOfMessagesToMove != nil {
		st.ToMove = int(*r.ApproximateNumberOfMessagesToMove)
	}
	st.Running = st.Status == "RUNNING" || st.Status == "CANCELLING"
	return st, nil
}

// CancelMove implements Mover.
func (d *SQSDeadLetters) CancelMove(ctx context.Context, handle string) error {
	_, err := d.Client.CancelMessageMoveTask(ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: aws.String(handle)})
	return err
}
