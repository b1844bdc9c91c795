package lambdasaga

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/redrive"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/objects/s3objects"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// ClientConfig points a Client at a deployed stack: its outputs
// TableName, AdvanceQueueUrl and CompensateQueueUrl (docs/DEPLOY.md). The
// caller needs the stack's client policy (SagaClientPolicy).
type ClientConfig struct {
	// AWS is the SDK configuration (region, credentials):
	// config.LoadDefaultConfig(ctx), for instance.
	AWS                aws.Config
	Table              string // required
	AdvanceQueueURL    string // required
	CompensateQueueURL string // required
	// DynamoDBEndpoint and SQSEndpoint, when set, point at emulators.
	DynamoDBEndpoint, SQSEndpoint string
	// Bucket is the stack's output ValuesBucketName: where the functions
	// keep values over 8 KiB. With it the client reads a saga's large
	// values and starts sagas with inputs up to 32 MiB; without it, a saga
	// holding such values shows references and cannot be acted on.
	Bucket string
	// S3Endpoint, when set, points at an S3 emulator.
	S3Endpoint string
	// StartQueueURL is the stack's output StartQueueUrl: Redrive takes
	// the start queue's dead letters too when it is set.
	StartQueueURL string
}

// NewClient returns a client of the deployment cfg names. It makes no
// call until used.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Table == "" || cfg.AdvanceQueueURL == "" || cfg.CompensateQueueURL == "" {
		return nil, errors.New("lambdasaga: NewClient needs the table and both queue URLs (the stack's outputs TableName, AdvanceQueueUrl, CompensateQueueUrl)")
	}
	ddb := dynamodb.NewFromConfig(cfg.AWS, func(o *dynamodb.Options) {
		if cfg.DynamoDBEndpoint != "" {
			o.BaseEndpoint = aws.String(cfg.DynamoDBEndpoint)
		}
	})
	sq := sqs.NewFromConfig(cfg.AWS, func(o *sqs.Options) {
		if cfg.SQSEndpoint != "" {
			o.BaseEndpoint = aws.String(cfg.SQSEndpoint)
		}
	})
	store, err := dynamo.New(dynamo.Config{Client: ddb, Table: cfg.Table})
	if err != nil {
		return nil, err
	}
	queue, err := sqsqueue.New(sqsqueue.Config{Client: sq, URLs: map[durable.QueueName]string{durable.QueueAdvance: cfg.AdvanceQueueURL, durable.QueueCompensate: cfg.CompensateQueueURL}})
	if err != nil {
		return nil, err
	}
	var objects durable.Objects
	if cfg.Bucket != "" {
		s3c := s3.NewFromConfig(cfg.AWS, func(o *s3.Options) {
			if cfg.S3Endpoint != "" {
				o.BaseEndpoint, o.UsePathStyle = aws.String(cfg.S3Endpoint), true
			}
		})
		if objects, err = s3objects.New(s3objects.Config{Client: s3c, Bucket: cfg.Bucket}); err != nil {
			return nil, err
		}
	}
	c, err := newClient(store, queue, objects)
	if err != nil {
		return nil, err
	}
	c.deadLetters = redrive.SQSStack(sq, cfg.AdvanceQueueURL, cfg.CompensateQueueURL, cfg.StartQueueURL)
	return c, nil
}

// NewBackendClient returns a client on a store and a queue of your own
// (the backend contract, package durable).
func NewBackendClient(store durable.Store, queue durable.Queue) (*Client, error) {
	return newClient(store, queue, nil)
}

// newClient is a client on store and queue, and objects when not nil.
func newClient(store durable.Store, queue durable.Queue, objects durable.Objects) (*Client, error) {
	if store == nil || queue == nil {
		return nil, errors.New("lambdasaga: a store and a queue are required")
	}
	plans := engine.NewPlans(store, saga.Options{})
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: store, Queue: queue, Plans: plans, Objects: objects})
	if err != nil {
		return nil, err
	}
	return &Client{coord: coord, plans: plans, clock: durable.SystemClock{}}, nil
}
