// Command advance is the Lambda function behind the advance queue: it handles
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
		fmt.Fprintf(os.Stderr, "advance: %v\n", err)
		os.Exit(1)
	}
	lambda.StartHandlerFunc(h.Handle)
}
