// Package local runs the deployed shape of lambdasaga on one machine
// without Docker: the table and queues that infra/template.yaml declares,
// created on the DynamoDB and SQS emulators; the functions' real bootstrap
// binaries, each worker under its own aws-lambda-rie (one RIE serves one
// invocation at a time); and pollers that stand in for Lambda's SQS event
// source mapping (batch size and window from the template, visibility
// timeout, partial batch failures, redrive to the dead-letter queue); and
// schedulers that stand in for EventBridge's scheduled rules, invoking the
// scheduled functions on their rate (or a shorter one, for tests) with the
// event EventBridge would send.
package local

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// createTable creates the template's table on the emulator.
func createTable(ctx context.Context, client *dynamodb.Client, tb samtemplate.Table, name string) error {
	in := &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: ddbtypes.BillingMode(tb.BillingMode)}
	for _, a := range tb.AttributeDefinitions {
		in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{AttributeName: aws.String(a.Name), AttributeType: ddbtypes.ScalarAttributeType(a.Type)})
	}
	keySchema := func(ks []samtemplate.Key) []ddbtypes.KeySchemaElement {
		var out []ddbtypes.KeySchemaElement
		for _, k := range ks {
			out = append(out, ddbtypes.KeySchemaElement{AttributeName: aws.String(k.Name), KeyType: ddbtypes.KeyType(k.KeyType)})
		}
		return out
	}
	in.KeySchema = keySchema(tb.KeySchema)
	for _, ix := range tb.GlobalIndexes {
		g := ddbtypes.GlobalSecondaryIndex{IndexName: aws.String(ix.Name), KeySchema: keySchema(ix.KeySchema),
			Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionType(ix.ProjectionType)}}
		if len(ix.NonKeyAttributes) > 0 {
			g.Projection.NonKeyAttributes = ix.NonKeyAttributes
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, g)
	}
	_, err := client.CreateTable(ctx, in)
	var inUse *ddbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s (from %s): %w", name, tb.Name, err)
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
	return w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second)
}

// createQueues creates every queue of the template, dead-letter queues
// first, and returns their URLs by logical id. visibility, when
// set, replaces the template's visibility timeouts (local runs use short
// ones so that failed messages come back quickly).
func createQueues(ctx context.Context, client *sqs.Client, tpl *samtemplate.Template, prefix string, visibility time.Duration) (map[string]string, error) {
	urls, arns := map[string]string{}, map[string]string{}
	create := func(q samtemplate.Queue) error {
		attrs := map[string]string{"VisibilityTimeout": strconv.Itoa(q.VisibilityTimeout)}
		if visibility > 0 {
			attrs["VisibilityTimeout"] = strconv.Itoa(int(visibility.Seconds()))
		}
		if q.DeadLetterQueue != "" {
			dlqArn, ok := arns[q.DeadLetterQueue]
			if !ok {
				return fmt.Errorf("queue %s: dead-letter queue %s not created first", q.Name, q.DeadLetterQueue)
			}
			attrs["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, dlqArn, q.MaxReceiveCount)
		}
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(prefix + q.Name), Attributes: attrs})
		if err != nil {
			return fmt.Errorf("create queue %s: %w", q.Name, err)
		}
		got, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return fmt.Errorf("queue %s: %w", q.Name, err)
		}
		urls[q.Name], arns[q.Name] = *out.QueueUrl, got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
		return nil
	}
	for _, pass := range []bool{false, true} { // queues without a dead-letter queue first
		for _, q := range tpl.Queues {
			if (q.DeadLetterQueue != "") == pass {
				if err := create(q); err != nil {
					return nil, err
				}
			}
		}
	}
	return urls, nil
}
