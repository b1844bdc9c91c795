package local

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// poller stands in for one worker of Lambda's SQS event source mapping:
// receive a batch, invoke the function with it, delete what succeeded.
// Records reported as batch item failures (or every record, when the
// invocation fails) stay on the queue and come back after the visibility
// timeout; the queue's redrive policy moves them to the dead-letter queue.
type poller struct {
	env      *Env
	client   *sqs.Client
	fn       samtemplate.Function
	event    samtemplate.EventSource
	queueURL string
	rieURL   string
	worker   int
	// busy is the worker's: its pollers (one per event source) invoke it
	// one at a time, as Lambda runs one invocation at a time in an
	// execution environment; aws-lambda-rie crashes on a second
	// invocation while one runs.
	busy *sync.Mutex
}

func (p *poller) run(ctx context.Context) {
	httpClient := &http.Client{Timeout: time.Duration(p.fn.Timeout+5) * time.Second}
	calm := context.WithoutCancel(ctx) // a receive under way is finished, not cut off
	// The queue's ARN as Lambda gives it: its name, the prefix included
	// (the start queue's handler knows its queue by the name in its URL).
	arn := "arn:aws:sqs:us-east-1:000000000000:" + p.queueURL[strings.LastIndexByte(p.queueURL, '/')+1:]
	for ctx.Err() == nil {
		wait := int32(max(1, min(20, p.event.WindowSeconds)))
		out, err := p.client.ReceiveMessage(calm, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(p.queueURL), MaxNumberOfMessages: int32(min(10, p.event.BatchSize)), WaitTimeSeconds: wait,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			p.env.logf("%s poller %d: receive: %v", p.fn.Name, p.worker, err)
			sleep(ctx, time.Second)
			continue
		}
		if len(out.Messages) == 0 {
			continue
		}
		ev := events.SQSEvent{}
		for _, m := range out.Messages {
			rec := events.SQSMessage{
				MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
				Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: m.Attributes, MessageAttributes: map[string]events.SQSMessageAttribute{},
				EventSource: "aws:sqs", EventSourceARN: arn, AWSRegion: "us-east-1",
			}
			for k, a := range m.MessageAttributes {
				rec.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(a.DataType), StringValue: a.StringValue}
			}
			ev.Records = append(ev.Records, rec)
		}
		failed, err := p.invoke(calm, httpClient, ev)
		if err != nil {
			p.env.logf("%s poller %d: invocation failed, %d records return after the visibility timeout: %v", p.fn.Name, p.worker, len(ev.Records), err)
			continue
		}
		for _, m := range out.Messages {
			if failed[aws.ToString(m.MessageId)] {
				continue
			}
			if _, err := p.client.DeleteMessage(calm, &sqs.DeleteMessageInput{QueueUrl: aws.String(p.queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				p.env.logf("%s poller %d: delete %s: %v", p.fn.Name, p.worker, aws.ToString(m.MessageId), err)
			}
		}
	}
}

// invoke posts the event to the worker's RIE and returns the failed ids.
func (p *poller) invoke(ctx context.Context, hc *http.Client, ev events.SQSEvent) (map[string]bool, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	p.busy.Lock()
	out, err := invokeRIE(ctx, hc, p.rieURL, body)
	p.busy.Unlock()
	if err != nil {
		return nil, err
	}
	var r events.SQSEventResponse
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("function response %q is not an SQSEventResponse: %w", out, err)
	}
	failed := map[string]bool{}
	for _, f := range r.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	if len(failed) > 0 {
		p.env.logf("%s poller %d: %d of %d records failed: %v", p.fn.Name, p.worker, len(failed), len(ev.Records), keys(failed))
	}
	return failed, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
