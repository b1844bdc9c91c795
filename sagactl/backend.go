package sagactl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/aws/smithy-go/middleware"

	"github.com/lambdasaga/lambdasaga/embedded"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// backendFlags choose where run keeps state and messages: in memory (the
// default) or on DynamoDB and SQS emulators.
type backendFlags struct {
	dynamoEndpoint string
	sqsEndpoint    string
	table          string
	queuePrefix    string
}

func (b *backendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.dynamoEndpoint, "dynamodb-endpoint", "", "keep saga state in DynamoDB at this endpoint (an emulator, e.g. dynalite) instead of memory")
	fs.StringVar(&b.sqsEndpoint, "sqs-endpoint", "", "send messages through SQS at this endpoint (an emulator, e.g. fauxqs) instead of memory")
	fs.StringVar(&b.table, "table", "lambdasaga", "DynamoDB table, created if missing")
	fs.StringVar(&b.queuePrefix, "queue-prefix", "lambdasaga-", "SQS queue name prefix; queues are created if missing")
}

// apply points cfg at the emulators when their endpoints are given.
func (b *backendFlags) apply(ctx context.Context, cfg *embedded.Config, apiOptions []func(*middleware.Stack) error) error {
	if b.dynamoEndpoint == "" && b.sqsEndpoint == "" {
		return nil
	}
	if b.dynamoEndpoint == "" || b.sqsEndpoint == "" {
		return errors.New("--dynamodb-endpoint and --sqs-endpoint go together")
	}
	ddb := awslocal.DynamoDB(b.dynamoEndpoint, apiOptions...)
	if err := dynamo.CreateTable(ctx, ddb, b.table); err != nil {
		return fmt.Errorf("--dynamodb-endpoint %s: %w", b.dynamoEndpoint, err)
	}
	store, err := dynamo.New(dynamo.Config{Client: ddb, Table: b.table})
	if err != nil {
		return err
	}
	sq := awslocal.SQS(b.sqsEndpoint, apiOptions...)
	urls, err := sqsqueue.CreateQueues(ctx, sq, sqsqueue.QueueSpec{Prefix: b.queuePrefix, MaxReceiveCount: 5, Visibility: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("--sqs-endpoint %s: %w", b.sqsEndpoint, err)
	}
	queue, err := sqsqueue.New(sqsqueue.Config{Client: sq, URLs: urls})
	if err != nil {
		return err
	}
	cfg.Store, cfg.Queue, cfg.Receiver = store, queue, queue
	cfg.Visibility = 30 * time.Second
	cfg.PollInterval = 20 * time.Millisecond
	return nil
}
