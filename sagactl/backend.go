package sagactl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/memobjects"
	"github.com/lambdasaga/lambdasaga/internal/redrive"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
	"github.com/lambdasaga/lambdasaga/objects/s3objects"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// Defaults of run's table and queue prefix on the emulators, which the
// commands on sagas take too, so that they find what run made.
const (
	defaultTable       = "lambdasaga"
	defaultQueuePrefix = "lambdasaga-"
)

// backendFlags choose where run keeps state and messages: in memory (the
// default) or on DynamoDB and SQS emulators.
type backendFlags struct {
	dynamoEndpoint string
	sqsEndpoint    string
	table          string
	queuePrefix    string
	s3Endpoint     string
	bucket         string
}

// defaultBucket is run's bucket on an S3 emulator.
const defaultBucket = "lambdasaga"

func (b *backendFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&b.dynamoEndpoint, "dynamodb-endpoint", "", "keep saga state in DynamoDB at this endpoint (an emulator, e.g. dynalite) instead of memory")
	fs.StringVar(&b.sqsEndpoint, "sqs-endpoint", "", "send messages through SQS at this endpoint (an emulator, e.g. fauxqs) instead of memory")
	fs.StringVar(&b.table, "table", defaultTable, "DynamoDB table, created if missing")
	fs.StringVar(&b.queuePrefix, "queue-prefix", defaultQueuePrefix, "SQS queue name prefix; queues are created if missing")
	fs.StringVar(&b.s3Endpoint, "s3-endpoint", "", "keep values over 8 KiB as objects in S3 at this endpoint (an emulator) instead of memory; without it, they are kept in memory, or inline on --dynamodb-endpoint")
	fs.StringVar(&b.bucket, "bucket", defaultBucket, "S3 bucket for --s3-endpoint, created if missing")
}

// offloads reports whether values over the threshold are kept as objects:
// in memory (the state is in memory too) or on --s3-endpoint. State on
// --dynamodb-endpoint with objects in memory would outlive them.
func (b *backendFlags) offloads() bool { return b.s3Endpoint != "" || b.dynamoEndpoint == "" }

// objects is where values over the threshold go: nil when they stay
// inline. The bucket is created if missing when create is set; else it
// must exist.
func (b *backendFlags) objects(ctx context.Context, apiOptions []func(*middleware.Stack) error, create bool) (durable.Objects, error) {
	switch {
	case b.s3Endpoint != "":
		client := awslocal.S3(b.s3Endpoint, apiOptions...)
		if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &b.bucket}); err != nil {
			if !create {
				return nil, fmt.Errorf("--s3-endpoint %s: bucket %s: %w", b.s3Endpoint, b.bucket, err)
			}
			if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b.bucket}); err != nil {
				return nil, fmt.Errorf("--s3-endpoint %s: create bucket %s: %w", b.s3Endpoint, b.bucket, err)
			}
		}
		return s3objects.New(s3objects.Config{Client: client, Bucket: b.bucket})
	case b.dynamoEndpoint == "":
		return memobjects.New(), nil
	}
	return nil, nil
}

// apply points cfg at the emulators when their endpoints are given.
func (b *backendFlags) apply(ctx context.Context, cfg *embedded.Config, apiOptions []func(*middleware.Stack) error) error {
	objects, err := b.objects(ctx, apiOptions, true)
	if err != nil {
		return err
	}
	if objects != nil {
		cfg.Objects = objects
	}
	if b.dynamoEndpoint == "" && b.sqsEndpoint == "" {
		return nil
	}
	if b.dynamoEndpoint == "" || b.sqsEndpoint == "" {
		return errors.New("--dynamodb-endpoint and --sqs-endpoint go together")
	}
	em := emulatorStack{dynamoEndpoint: b.dynamoEndpoint, sqsEndpoint: b.sqsEndpoint, table: b.table, queuePrefix: b.queuePrefix}
	store, queue, err := em.open(ctx, true, apiOptions)
	if err != nil {
		return err
	}
	// The start queue, so that any service can send requests that
	// sagactl work then carries out.
	if _, err := em.startQueues(ctx, true, apiOptions); err != nil {
		return err
	}
	cfg.Store, cfg.Queue, cfg.Receiver = store, queue, queue
	cfg.Visibility = 30 * time.Second
	cfg.PollInterval = 20 * time.Millisecond
	return nil
}

// where is the flags that name the same table and queues to the commands
// on sagas, its defaults left out.
func (b *backendFlags) where() string {
	w := "--dynamodb-endpoint " + b.dynamoEndpoint + " --sqs-endpoint " + b.sqsEndpoint
	if b.table != defaultTable {
		w += " --table " + b.table
	}
	if b.queuePrefix != defaultQueuePrefix {
		w += " --queue-prefix " + b.queuePrefix
	}
	if b.s3Endpoint != "" {
		w += " --s3-endpoint " + b.s3Endpoint
		if b.bucket != defaultBucket {
			w += " --bucket " + b.bucket
		}
	}
	return w
}

// emulatorStack names a table and queues on DynamoDB and SQS emulators: those
// `sagactl run --dynamodb-endpoint URL --sqs-endpoint URL` keeps its sagas
// in, which the commands on sagas then read and act on.
type emulatorStack struct {
	dynamoEndpoint, sqsEndpoint string
	table                       string
	queuePrefix                 string // the queues are queuePrefix+"advance" and queuePrefix+"compensate"...
	// urls, when set, name the advance and compensate queues instead of
	// queuePrefix.
	urls map[durable.QueueName]string
	// principal signs the store's and queue's calls (awslocal.ConfigAs):
	// the operator's, for the commands on sagas; "" for run, whose workers
	// stand in for the functions.
	principal string
}

// open returns the store and queue on the emulators. With create, it
// creates the table and queues that are missing (run); without, a missing
// table or queue is an error that says which, and where.
func (e emulatorStack) open(ctx context.Context, create bool, apiOptions []func(*middleware.Stack) error) (*dynamo.Store, *sqsqueue.Queue, error) {
	principal := e.principal
	if principal == "" {
		principal = "local"
	}
	// The checks and creates are the emulators' alone (with a deployed
	// stack the table and queues are the template's): they sign as the
	// harness, what the commands do as the principal.
	ddb := awslocal.DynamoDB(e.dynamoEndpoint, apiOptions...)
	if create {
		if err := dynamo.CreateTable(ctx, ddb, e.table); err != nil {
			return nil, nil, endpointError("--dynamodb-endpoint", e.dynamoEndpoint, err)
		}
	} else if err := e.checkTable(ctx, ddb); err != nil {
		return nil, nil, err
	}
	store, err := dynamo.New(dynamo.Config{Client: awslocal.DynamoDBAs(principal, e.dynamoEndpoint, apiOptions...), Table: e.table})
	if err != nil {
		return nil, nil, err
	}
	sq := awslocal.SQS(e.sqsEndpoint, apiOptions...)
	urls := e.urls
	switch {
	case create:
		urls, err = sqsqueue.CreateQueues(ctx, sq, sqsqueue.QueueSpec{Prefix: e.queuePrefix, MaxReceiveCount: 5, Visibility: 30 * time.Second})
		if err != nil {
			return nil, nil, endpointError("--sqs-endpoint", e.sqsEndpoint, err)
		}
	case urls == nil:
		if urls, err = e.queueURLs(ctx, sq); err != nil {
			return nil, nil, err
		}
	}
	queue, err := sqsqueue.New(sqsqueue.Config{Client: awslocal.SQSAs(principal, e.sqsEndpoint, apiOptions...), URLs: urls})
	if err != nil {
		return nil, nil, err
	}
	return store, queue, nil
}

// startQueues returns the start queue and its dead-letter queue on the
// emulators, <prefix>start and <prefix>start-dlq; with create, made if
// missing. Without, a missing one is startqueue.FindQueues' error, a
// *sqstypes.QueueDoesNotExist.
func (e emulatorStack) startQueues(ctx context.Context, create bool, apiOptions []func(*middleware.Stack) error) (startqueue.QueueURLs, error) {
	sq := awslocal.SQS(e.sqsEndpoint, apiOptions...)
	if !create {
		return startqueue.FindQueues(ctx, sq, e.queuePrefix)
	}
	urls, err := startqueue.CreateQueues(ctx, sq, e.queuePrefix, 5, 30*time.Second)
	if err != nil {
		return urls, endpointError("--sqs-endpoint", e.sqsEndpoint, err)
	}
	return urls, nil
}

// deadLetters finds the dead-letter queues of the queues on the
// emulators (redrive), looked up as the operator, as on a stack: by the
// URLs given, else by the prefix.
func (e emulatorStack) deadLetters(apiOptions []func(*middleware.Stack) error) *redrive.SQSQueues {
	f := &redrive.SQSQueues{Client: awslocal.SQSAs(e.principal, e.sqsEndpoint, apiOptions...), URLs: map[redrive.Queue]string{}, Names: map[redrive.Queue]string{}}
	for _, q := range redrive.Queues() {
		f.Names[q] = e.queuePrefix + string(q)
	}
	for q, u := range e.urls {
		f.URLs[redrive.Queue(q)] = u
	}
	return f
}

// checkTable makes sure the table is there and is a saga table, before a
// command reads it: DescribeTable is free (no capacity is billed).
func (e emulatorStack) checkTable(ctx context.Context, ddb *dynamodb.Client) error {
	out, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &e.table})
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return fmt.Errorf("--dynamodb-endpoint %s: no table %s there (sagactl run --dynamodb-endpoint makes one, %s unless its --table said otherwise: pass the same --table)", e.dynamoEndpoint, e.table, defaultTable)
	}
	if err != nil {
		return endpointError("--dynamodb-endpoint", e.dynamoEndpoint, err)
	}
	if !slices.ContainsFunc(out.Table.GlobalSecondaryIndexes, func(ix types.GlobalSecondaryIndexDescription) bool {
		return ix.IndexName != nil && *ix.IndexName == dynamo.IndexByStatus
	}) {
		return fmt.Errorf("--dynamodb-endpoint %s: table %s is not a saga table (it has no %s index)", e.dynamoEndpoint, e.table, dynamo.IndexByStatus)
	}
	return nil
}

// queueURLs looks up the queues by name, queuePrefix first.
func (e emulatorStack) queueURLs(ctx context.Context, sq *sqs.Client) (map[durable.QueueName]string, error) {
	urls := map[durable.QueueName]string{}
	for _, q := range durable.QueueNames() {
		name := e.queuePrefix + string(q)
		out, err := sq.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
		var missing *sqstypes.QueueDoesNotExist
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("--sqs-endpoint %s: no queue %s there (sagactl run --sqs-endpoint makes the queues, named %s... unless its --queue-prefix said otherwise: pass the same --queue-prefix)", e.sqsEndpoint, name, defaultQueuePrefix)
		}
		if err != nil {
			return nil, endpointError("--sqs-endpoint", e.sqsEndpoint, err)
		}
		urls[q] = *out.QueueUrl
	}
	return urls, nil
}

// endpointError names the flag and the endpoint of an error, and says so
// plainly when nothing answers there.
func endpointError(flagName, endpoint string, err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return fmt.Errorf("%s %s: nothing answers there (%v); are the emulators running (make emulators, then go run ./tools/withemulators, or sagactl local)?", flagName, endpoint, op)
	}
	return fmt.Errorf("%s %s: %w", flagName, endpoint, err)
}
