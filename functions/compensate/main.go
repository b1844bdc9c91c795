// Command compensate is the Lambda function behind the compensate queue: it handles
// batches of saga messages with the shared coordinator. Clients and the
// engine are built once, at cold start, outside the handler.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	h, err := newHandler(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "compensate: %v\n", err)
		os.Exit(1)
	}
	lambda.StartHandlerFunc(h.Handle)
}
