package bench_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdasaga/lambdasaga/accounting"
	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/queue/sqs"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// backend is a fresh table and queues on the emulators, every request counted.
type backend struct {
	ddb     *dynamodb.Client
	sq      *awssqs.Client
	store   *dynamo.Store
	queue   *sqs.Queue
	table   string
	urls    map[engine.QueueName]string
	counter *accounting.Counter
}

func newBackend(t testing.TB) *backend {
	t.Helper()
	dynEP := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sqsEP := awslocal.Endpoint(t, awslocal.EnvSQS)
	b := &backend{counter: accounting.New()}
	b.ddb = awslocal.DynamoDB(dynEP, b.counter.Register)
	b.sq = awslocal.SQS(sqsEP, b.counter.Register)
	var r [6]byte
	_, _ = rand.Read(r[:])
	b.table = "bench-" + hex.EncodeToString(r[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dynamo.CreateTable(ctx, b.ddb, b.table); err != nil {
		t.Fatal(err)
	}
	var err error
	if b.store, err = dynamo.New(dynamo.Config{Client: b.ddb, Table: b.table}); err != nil {
		t.Fatal(err)
	}
	if b.urls, err = sqs.CreateQueues(ctx, b.sq, sqs.QueueSpec{Prefix: b.table + "-", Visibility: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if b.queue, err = sqs.New(sqs.Config{Client: b.sq, URLs: b.urls}); err != nil {
		t.Fatal(err)
	}
	b.counter.Reset()
	return b
}

// linearSaga is n action steps, each compensable, writing out into vars.
func linearSaga(n int) string {
	var s strings.Builder
	s.WriteString("saga: linear\nsteps:\n")
	for i := range n {
		fmt.Fprintf(&s, "  - {id: s%d, action: work, out: r%d, compensate: {action: undo}}\n", i, i)
	}
	return s.String()
}
