package sqsqueue_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
)

// sqsAnswering is a queue whose SQS answers every request with the error
// typ (a JSON-protocol error, as SQS sends it), and no retries.
func sqsAnswering(t *testing.T, typ string) *sqsqueue.Queue {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("x-amzn-query-error", typ+";Sender")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#` + typ + `","message":"answered ` + typ + `"}`))
	}))
	t.Cleanup(srv.Close)
	client := sqs.NewFromConfig(awslocal.Config(), func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.Retryer = aws.NopRetryer{}
	})
	q, err := sqsqueue.New(sqsqueue.Config{Client: client, URLs: map[durable.QueueName]string{
		durable.QueueAdvance: srv.URL + "/q/advance", durable.QueueCompensate: srv.URL + "/q/compensate",
	}})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// SQS errors are interpreted at the boundary: a stale receipt handle is not
// an error, throttling is durable.ErrThrottled with the SDK error kept.
func TestErrorsAreInterpretedAtTheBoundary(t *testing.T) {
	ctx := context.Background()
	del := &durable.DeleteParams{Queue: durable.QueueAdvance, ReceiptHandle: "stale"}
	if err := sqsAnswering(t, "ReceiptHandleIsInvalid").Delete(ctx, del); err != nil {
		t.Fatalf("delete with a stale receipt handle: %v, want nil (the message was received again, or is gone)", err)
	}
	if err := sqsAnswering(t, "InvalidParameterValue").Delete(ctx, del); err == nil {
		t.Fatal("delete that SQS refused for another reason: nil error")
	}
	for _, typ := range []string{"RequestThrottled", "KmsThrottled", "ThrottlingException"} {
		err := sqsAnswering(t, typ).Send(ctx, []durable.Message{{SagaID: "s-1", Version: 1, Queue: durable.QueueAdvance, Step: "a", Attempt: 1}})
		var ae smithy.APIError
		if !errors.Is(err, durable.ErrThrottled) || !errors.As(err, &ae) || !strings.Contains(ae.ErrorCode(), typ) {
			t.Errorf("send answered %s: %v, want durable.ErrThrottled wrapping the SDK's error", typ, err)
		}
	}
}
