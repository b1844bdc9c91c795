// Command fn is the kill test's Lambda function: the stock handler with
// the ledger actions registered, and the travel example's, recording
// their effects in the ledger (the end-to-end test of forks runs them).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdasaga/lambdasaga/internal/chaos"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

func main() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ledger, err := chaos.FromEnv(dynamodb.NewFromConfig(awsCfg), os.Getenv(chaos.EnvLedgerTable), os.Getenv(chaos.EnvTokenDir))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	reg := engine.NewRegistry()
	ledger.Register(reg)
	ledger.RegisterTravel(reg)
	h, err := sqshandler.FromEnvironment(ctx, reg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambda.StartHandlerFunc(h.Handle)
}
