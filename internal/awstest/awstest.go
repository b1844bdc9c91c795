// Package awstest gives an integration test a table and queues of its own
// on the DynamoDB and SQS emulators, with every request counted, and S3 in
// its own process (NewS3). Tests skip when the emulators' endpoints are
// not set (make test sets them).
package awstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/accounting"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// Backend is a fresh table and fresh queues.
type Backend struct {
	DynamoDBEndpoint, SQSEndpoint string
	DynamoDB                      *dynamodb.Client
	SQS                           *sqs.Client
	Table                         string
	URLs                          map[durable.QueueName]string
	Store                         *dynamo.Store
	Queue                         *sqsqueue.Queue
	// Counter counts every request the clients make; it starts at zero
	// once the resources exist.
	Counter *accounting.Counter
}

// New creates the table and queues, named uniquely for this test.
func New(t testing.TB) *Backend {
	t.Helper()
	b := &Backend{DynamoDBEndpoint: awslocal.Endpoint(t, awslocal.EnvDynamoDB), SQSEndpoint: awslocal.Endpoint(t, awslocal.EnvSQS), Counter: accounting.New()}
	b.DynamoDB = awslocal.DynamoDB(b.DynamoDBEndpoint, b.Counter.Register)
	b.SQS = awslocal.SQS(b.SQSEndpoint, b.Counter.Register)
	var r [6]byte
	_, _ = rand.Read(r[:])
	b.Table = "t-" + hex.EncodeToString(r[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dynamo.CreateTable(ctx, b.DynamoDB, b.Table); err != nil {
		t.Fatal(err)
	}
	var err error
	if b.Store, err = dynamo.New(dynamo.Config{Client: b.DynamoDB, Table: b.Table}); err != nil {
		t.Fatal(err)
	}
	if b.URLs, err = sqsqueue.CreateQueues(ctx, b.SQS, sqsqueue.QueueSpec{Prefix: b.Table + "-", MaxReceiveCount: 3, Visibility: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if b.Queue, err = sqsqueue.New(sqsqueue.Config{Client: b.SQS, URLs: b.URLs}); err != nil {
		t.Fatal(err)
	}
	b.Counter.Reset()
	return b
}

// As returns a store and a queue on the same table and queues whose calls
// sign as principal: the recording proxies attribute them to it, and the
// IAM check evaluates them against its policy (internal/awscall,
// internal/iamcheck).
func (b *Backend) As(t testing.TB, principal string) (*dynamo.Store, *sqsqueue.Queue) {
	t.Helper()
	store, err := dynamo.New(dynamo.Config{Client: awslocal.DynamoDBAs(principal, b.DynamoDBEndpoint, b.Counter.Register), Table: b.Table})
	if err != nil {
		t.Fatal(err)
	}
	queue, err := sqsqueue.New(sqsqueue.Config{Client: awslocal.SQSAs(principal, b.SQSEndpoint, b.Counter.Register), URLs: b.URLs})
	if err != nil {
		t.Fatal(err)
	}
	return store, queue
}
