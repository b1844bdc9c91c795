// Command sweep is the scheduled Lambda function: every minute it fires the
// timers due within the minute (waits, timeouts, deadlines of waiting
// sagas); every 15 minutes it re-sends the messages of unfinished sagas
// idle too long (a start, cancel or resume whose write landed but whose send
// was cut off). Clients are built once, at cold start.
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
		fmt.Fprintf(os.Stderr, "sweep: %v\n", err)
		os.Exit(1)
	}
	lambda.StartHandlerFunc(h.handle)
}
