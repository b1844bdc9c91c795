package sqsqueue_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/queue/queuetest"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
)

func newQueue(t *testing.T, maxReceives int) *sqsqueue.Queue {
	t.Helper()
	ep := awslocal.Endpoint(t, awslocal.EnvSQS)
	client := awslocal.SQS(ep)
	var b [6]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	urls, err := sqsqueue.CreateQueues(ctx, client, sqsqueue.QueueSpec{Prefix: "t" + hex.EncodeToString(b[:]) + "-", MaxReceiveCount: maxReceives, Visibility: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqsqueue.New(sqsqueue.Config{Client: client, URLs: urls})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestConformance(t *testing.T) {
	t.Parallel()
	queuetest.Exercise(t, func(t *testing.T) *queuetest.Harness {
		q := newQueue(t, 3)
		return &queuetest.Harness{
			Queue: q, Receiver: q, MaxReceives: 3,
			SendRaw: func(ctx context.Context, name durable.QueueName, body []byte) error {
				return q.SendBody(ctx, name, body, 0)
			},
			Sleep: time.Sleep,
		}
	})
}

func TestRecordsAndBatchResponse(t *testing.T) {
	raw, err := os.ReadFile("testdata/event.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := jsonUnmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	recs := sqsqueue.Records(ev)
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	if recs[0].Err != nil || recs[0].Message.SagaID != "o-1" || recs[0].Message.Version != 3 || recs[0].ReceiveCount != 1 {
		t.Fatalf("record 0: %+v", recs[0])
	}
	if !errors.Is(recs[1].Err, durable.ErrMalformedMessage) || string(recs[1].Body) != "not a message" {
		t.Fatalf("record 1: %+v", recs[1])
	}
	resp := sqsqueue.BatchResponse([]string{recs[1].MessageID})
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-2" {
		t.Fatalf("%+v", resp)
	}
	if empty := sqsqueue.BatchResponse(nil); empty.BatchItemFailures == nil {
		t.Fatal("an empty response must still carry an empty list")
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
