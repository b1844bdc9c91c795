// Command orderfn is the order example's Lambda function: the stock
// handler with the order saga's Go actions registered. Deploy it as both
// the advance and the compensate function (compensations are Go actions
// too). The fake services live in the function's memory, so they are for
// demonstration and the local loop only.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/functions/sqshandler"
)

func main() {
	reg := engine.NewRegistry()
	order.NewServices().Register(reg)
	h, err := sqshandler.FromEnvironment(context.Background(), reg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "orderfn: %v\n", err)
		os.Exit(1)
	}
	lambda.StartHandlerFunc(h.Handle)
}
