// Package awslocal builds AWS SDK clients for the local emulators: a fixed
// region, static dummy credentials, and the emulator's endpoint.
package awslocal

import (
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// Environment variables that switch on the integration tests; make test
// sets them after starting the emulators.
const (
	EnvDynamoDB = "LAMBDASAGA_DYNAMODB_ENDPOINT"
	EnvSQS      = "LAMBDASAGA_SQS_ENDPOINT"
)

// Config is an aws.Config for emulators.
func Config(apiOptions ...func(*middleware.Stack) error) aws.Config {
	return aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("local", "local", ""),
		APIOptions:       apiOptions,
		RetryMaxAttempts: 3,
	}
}

// DynamoDB returns a client for the emulator at endpoint.
func DynamoDB(endpoint string, apiOptions ...func(*middleware.Stack) error) *dynamodb.Client {
	return dynamodb.NewFromConfig(Config(apiOptions...), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// SQS returns a client for the emulator at endpoint.
func SQS(endpoint string, apiOptions ...func(*middleware.Stack) error) *sqs.Client {
	return sqs.NewFromConfig(Config(apiOptions...), func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// Endpoint returns the endpoint in the environment variable, or skips the
// test: integration tests run only where make test started the emulators.
func Endpoint(t testing.TB, env string) string {
	t.Helper()
	ep := os.Getenv(env)
	if ep == "" {
		t.Skipf("%s is not set: run make test, which starts the emulators", env)
	}
	return ep
}
