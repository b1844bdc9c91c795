package startqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Message attributes of a dead-lettered request: why it was refused, and
// what it was. The body is the request as it was sent.
const (
	AttrReason    = "lambdasaga-reason"
	AttrKind      = "lambdasaga-kind"
	AttrSagaID    = "lambdasaga-saga-id"
	AttrMessageID = "lambdasaga-message-id"
)

// SQSClient is the part of *sqs.Client the start queue uses.
type SQSClient interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// SQSDeadLetters sends refused requests to the start queue's dead-letter
// queue, with their reason in message attributes.
type SQSDeadLetters struct {
	Client SQSClient
	URL    string // the dead-letter queue (stack output StartDeadLetterQueueUrl)
}

// maxReasonBytes bounds the reason attribute: an error of the engine may
// be long (a definition's problems), and the message's attributes count
// toward its size.
const maxReasonBytes = 2048

// maxMessageBytes is SQS's limit on a message: its body and its
// attributes (each one's name, type and value) together.
const maxMessageBytes = 1 << 20

// DeadLetter implements DeadLetters. The body goes unchanged (SQS took
// it on the start queue, so it takes it here); the attributes are made
// to fit what SQS takes, or a request whose reason it refuses would come
// back forever: each value in the characters SQS allows (others become
// U+FFFD: a reason may name a key the request spelt with control
// characters), cut on a character boundary, and only as much of them as
// the room the body leaves, the reason first.
func (d *SQSDeadLetters) DeadLetter(ctx context.Context, l *DeadLetter) error {
	body := string(l.Body)
	if body == "" {
		body = "(empty)" // SQS refuses an empty body
	}
	attrs := map[string]sqstypes.MessageAttributeValue{}
	room := maxMessageBytes - len(body)
	put := func(k, v string, most int) {
		const typ = "String"
		v = cutText(sqsText(v), min(most, room-len(k)-len(typ)))
		if v == "" {
			return // SQS refuses an empty value
		}
		room -= len(k) + len(typ) + len(v)
		attrs[k] = sqstypes.MessageAttributeValue{DataType: aws.String(typ), StringValue: aws.String(v)}
	}
	put(AttrReason, l.Reason, maxReasonBytes)
	put(AttrKind, l.Kind, maxReasonBytes)
	put(AttrSagaID, l.SagaID, maxReasonBytes)
	put(AttrMessageID, l.MessageID, maxReasonBytes)
	_, err := d.Client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(d.URL), MessageBody: aws.String(body), MessageAttributes: attrs})
	if err != nil {
		return fmt.Errorf("dead-letter queue: %w", err)
	}
	return nil
}

// sqsText is s in the characters SQS takes in a message (#x9, #xA, #xD,
// #x20 to #xD7FF, #xE000 to #xFFFD, #x10000 to #x10FFFF): any other,
// and any byte that is not UTF-8, becomes U+FFFD.
func sqsText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == 0x9, r == 0xA, r == 0xD, r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
			return r
		}
		return utf8.RuneError
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// cutText is s in at most n bytes, cut on a character boundary and
// ended with "…" when cut; "" when n leaves no room for that.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	n -= len(more)
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + more
}

// Poller reads the start queue outside Lambda (sagactl work, sagactl run
// on the emulators), as Lambda's event source mapping does for the
// functions: a message is deleted when it is done or refused, and left to
// come back after the visibility timeout when it is to be retried.
type Poller struct {
	Client  SQSClient
	URL     string // the start queue
	Handler *Handler
	Logger  *slog.Logger
	// Handled, when set, hears each message's outcome (sagactl work
	// prints and counts them).
	Handled func(Outcome)
}

// Run polls until ctx ends; a receive under way is finished first.
func (p *Poller) Run(ctx context.Context) error {
	if p.Client == nil || p.URL == "" || p.Handler == nil {
		return errors.New("startqueue: a poller needs a Client, a URL and a Handler")
	}
	log := p.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	calm := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		out, err := p.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(p.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount},
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.LogAttrs(ctx, slog.LevelWarn, "start queue: receive failed", slog.String("error", err.Error()))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for _, m := range out.Messages {
			n, _ := strconv.Atoi(m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
			o := p.Handler.Handle(calm, Message{ID: aws.ToString(m.MessageId), Body: []byte(aws.ToString(m.Body)), ReceiveCount: n})
			if p.Handled != nil {
				p.Handled(o)
			}
			if o.Verdict == Retry {
				continue
			}
			if _, err := p.Client.DeleteMessage(calm, &sqs.DeleteMessageInput{QueueUrl: aws.String(p.URL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				// It comes back and is carried out again: a no-op
				// (starts, signals and completions are idempotent).
				log.LogAttrs(ctx, slog.LevelWarn, "start queue: delete failed; the message comes back", slog.String("message_id", aws.ToString(m.MessageId)), slog.String("error", err.Error()))
			}
		}
	}
	return nil
}

// Names of the start queue and its dead-letter queue on the emulators,
// after the queue prefix (lambdasaga-start, lambdasaga-start-dlq).
const (
	QueueName           = "start"
	DeadLetterQueueName = "start-dlq"
)

// QueueClient is the part of *sqs.Client that finds and makes queues.
type QueueClient interface {
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, opts ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// QueueURLs are the start queue's and its dead-letter queue's.
type QueueURLs struct {
	Start, DeadLetter string
}

// CreateQueues makes the start queue and its dead-letter queue (with a
// redrive policy of maxReceiveCount deliveries) under prefix, as the
// template does on AWS; queues that exist are kept.
func CreateQueues(ctx context.Context, client QueueClient, prefix string, maxReceiveCount int, visibility time.Duration) (QueueURLs, error) {
	dout, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + DeadLetterQueueName),
		Attributes: map[string]string{"MessageRetentionPeriod": "1209600"}})
	if err != nil {
		return QueueURLs{}, fmt.Errorf("create queue %s: %w", prefix+DeadLetterQueueName, err)
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dout.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return QueueURLs{}, fmt.Errorf("queue %s arn: %w", prefix+DeadLetterQueueName, err)
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], maxReceiveCount)
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + QueueName), Attributes: map[string]string{
		"RedrivePolicy": redrive, "VisibilityTimeout": strconv.Itoa(int(visibility.Seconds())),
	}})
	if err != nil {
		return QueueURLs{}, fmt.Errorf("create queue %s: %w", prefix+QueueName, err)
	}
	return QueueURLs{Start: *out.QueueUrl, DeadLetter: *dout.QueueUrl}, nil
}

// FindQueues looks the start queue and its dead-letter queue up by name
// under prefix; an error wrapping *sqstypes.QueueDoesNotExist names a
// missing one.
func FindQueues(ctx context.Context, client QueueClient, prefix string) (QueueURLs, error) {
	var urls QueueURLs
	for _, q := range []struct {
		name string
		url  *string
	}{{prefix + QueueName, &urls.Start}, {prefix + DeadLetterQueueName, &urls.DeadLetter}} {
		out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q.name)})
		if err != nil {
			return QueueURLs{}, fmt.Errorf("queue %s: %w", q.name, err)
		}
		*q.url = *out.QueueUrl
	}
	return urls, nil
}
