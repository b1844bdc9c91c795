package dynamo_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// dynamoAnswering is a store whose DynamoDB answers every request with
// the error typ, and no retries.
func dynamoAnswering(t *testing.T, typ string) *dynamo.Store {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#` + typ + `","message":"answered ` + typ + `"}`))
	}))
	t.Cleanup(srv.Close)
	client := dynamodb.NewFromConfig(awslocal.Config(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.Retryer = aws.NopRetryer{}
	})
	s, err := dynamo.New(dynamo.Config{Client: client, Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestErrorsAreInterpretedAtTheBoundary(t *testing.T) {
	ctx := context.Background()
	rec := durable.SagaRecord{SagaID: "s-1", Version: 2, Status: durable.StatusRunning, Name: "n", DefinitionHash: "h", UpdatedAt: time.Now(), State: []byte{1}}
	update := &durable.SagaUpdateParams{Record: rec, ExpectedVersion: 1}
	if err := dynamoAnswering(t, "ConditionalCheckFailedException").SagaUpdate(ctx, update); !errors.Is(err, durable.ErrConflict) {
		t.Fatalf("update that lost its condition: %v, want durable.ErrConflict", err)
	}
	for _, typ := range []string{"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"} {
		err := dynamoAnswering(t, typ).SagaUpdate(ctx, update)
		var ae smithy.APIError
		if !errors.Is(err, durable.ErrThrottled) || !errors.As(err, &ae) || ae.ErrorCode() != typ {
			t.Errorf("update answered %s: %v, want durable.ErrThrottled wrapping the SDK's error", typ, err)
		}
	}
}
