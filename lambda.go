package lambdasaga

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

// LambdaHandler handles a batch of SQS records of the advance or the
// compensate queue, and reports those that must come back
// (ReportBatchItemFailures).
type LambdaHandler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// NewLambdaHandler returns the handler of a Lambda function that runs
// saga steps with actions, configured from the environment that
// infra/template.yaml sets (the table, the queues, tracing). For a main
// that starts the Lambda runtime itself; StartLambda does both.
func NewLambdaHandler(ctx context.Context, actions *Actions) (LambdaHandler, error) {
	if actions == nil {
		return nil, errors.New("lambdasaga: a Lambda function that runs steps needs actions")
	}
	h, err := sqshandler.FromEnvironment(ctx, actions.reg)
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}

// StartLambda is the main of a Lambda function that runs saga steps with
// actions: build it for provided.al2023 and deploy it as the advance and
// the compensate function (docs/DEPLOY.md). It never returns; a
// configuration it cannot use ends the process, the reason in the
// function's log.
func StartLambda(actions *Actions) {
	h, err := NewLambdaHandler(context.Background(), actions)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lambdasaga: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(h)
}
