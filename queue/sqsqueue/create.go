package sqsqueue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/lambdasaga/lambdasaga/durable"
)

// QueueSpec describes the queues to create for local use and tests; in AWS
// they come from infra/template.yaml.
type QueueSpec struct {
	Prefix          string        // queue names are Prefix+"advance", Prefix+"advance-dlq", ...
	MaxReceiveCount int           // redrive to the dead-letter queue after this many receives
	Visibility      time.Duration // the queues' default visibility timeout
}

// CreateQueues creates the advance and compensate queues, each with its
// dead-letter queue and redrive policy, and returns their URLs by name.
func CreateQueues(ctx context.Context, client *sqs.Client, spec QueueSpec) (map[durable.QueueName]string, error) {
	if spec.MaxReceiveCount == 0 {
		spec.MaxReceiveCount = 5
	}
	if spec.Visibility == 0 {
		spec.Visibility = 30 * time.Second
	}
	urls := map[durable.QueueName]string{}
	for _, q := range durable.QueueNames() {
		dlq := durable.DeadLetter(q)
		dout, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(spec.Prefix + string(dlq)),
			Attributes: map[string]string{"MessageRetentionPeriod": "1209600"}})
		if err != nil {
			return nil, fmt.Errorf("create queue %s: %w", dlq, err)
		}
		attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dout.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			return nil, fmt.Errorf("queue %s arn: %w", dlq, err)
		}
		redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, attrs.Attributes[string(types.QueueAttributeNameQueueArn)], spec.MaxReceiveCount)
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(spec.Prefix + string(q)), Attributes: map[string]string{
			"RedrivePolicy":     redrive,
			"VisibilityTimeout": strconv.Itoa(int(spec.Visibility.Seconds())),
		}})
		if err != nil {
			return nil, fmt.Errorf("create queue %s: %w", q, err)
		}
		urls[q], urls[dlq] = *out.QueueUrl, *dout.QueueUrl
	}
	return urls, nil
}
