// Package awslocal builds AWS SDK clients for the local emulators: a fixed
// region, static dummy credentials, and the emulator's endpoint.
package awslocal

import (
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// Environment variables that switch on the integration tests; make test
// sets them after starting the emulators.
const (
	EnvDynamoDB = "LAMBDASAGA_DYNAMODB_ENDPOINT"
	EnvSQS      = "LAMBDASAGA_SQS_ENDPOINT"
)

// The principals whose calls the IAM check evaluates, besides the
// functions (whose access key id is their logical id): each is the managed
// policy of infra/template.yaml that a deployment attaches to such a caller.
const (
	// ClientPrincipal is a service that starts, signals, cancels and
	// completes callbacks with the client package.
	ClientPrincipal = "SagaClientPolicy"
	// OperatorPrincipal is sagactl's commands on sagas.
	OperatorPrincipal = "SagaOperatorPolicy"
	// SenderPrincipal is a service in any language that sends requests to
	// the start queue with its own SDK (docs/START_QUEUE.md).
	SenderPrincipal = "SagaSenderPolicy"
)

// Config is an aws.Config for emulators. Its access key id is "local":
// the harness's own calls (creating tables and queues, a test's checks),
// which the IAM check leaves out.
func Config(apiOptions ...func(*middleware.Stack) error) aws.Config {
	return ConfigAs("local", apiOptions...)
}

// ConfigAs is Config signing with the access key id principal, by which the
// recording proxies in front of the emulators attribute each call
// (internal/awscall): the emulators accept any key.
func ConfigAs(principal string, apiOptions ...func(*middleware.Stack) error) aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider(principal, "local", ""),
		APIOptions:  apiOptions,
		Retryer:     localRetryer,
	}
}

// localRetryer retries as the SDK's standard retryer does, three attempts
// with backoff, without its client-side retry quota: the quota guards a
// service against retry storms, and an emulator on this machine that
// resets connections under a burst (a kill test starting 2,000 sagas) is
// better retried than failed once the quota's tokens are spent.
func localRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 3
		o.RateLimiter = ratelimit.None
	})
}

// DynamoDB returns a client for the emulator at endpoint.
func DynamoDB(endpoint string, apiOptions ...func(*middleware.Stack) error) *dynamodb.Client {
	return DynamoDBAs("local", endpoint, apiOptions...)
}

// SQS returns a client for the emulator at endpoint.
func SQS(endpoint string, apiOptions ...func(*middleware.Stack) error) *sqs.Client {
	return SQSAs("local", endpoint, apiOptions...)
}

// DynamoDBAs is DynamoDB signing as principal.
func DynamoDBAs(principal, endpoint string, apiOptions ...func(*middleware.Stack) error) *dynamodb.Client {
	return dynamodb.NewFromConfig(ConfigAs(principal, apiOptions...), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// SQSAs is SQS signing as principal.
func SQSAs(principal, endpoint string, apiOptions ...func(*middleware.Stack) error) *sqs.Client {
	return sqs.NewFromConfig(ConfigAs(principal, apiOptions...), func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// S3 returns a client for the S3 emulator at endpoint, addressing buckets
// by path (an emulator on 127.0.0.1 has no bucket host names).
func S3(endpoint string, apiOptions ...func(*middleware.Stack) error) *s3.Client {
	return S3As("local", endpoint, apiOptions...)
}

// S3As is S3 signing as principal.
func S3As(principal, endpoint string, apiOptions ...func(*middleware.Stack) error) *s3.Client {
	return s3.NewFromConfig(ConfigAs(principal, apiOptions...), func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
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
