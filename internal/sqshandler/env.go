package sqshandler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/emf"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lambdaaction"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/otelsaga"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
	"github.com/lambdasaga/lambdasaga/objects/s3objects"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// Environment variables the functions read (the template sets them).
const (
	EnvTable              = "LAMBDASAGA_TABLE"
	EnvAdvanceQueueURL    = "LAMBDASAGA_ADVANCE_QUEUE_URL"
	EnvCompensateQueueURL = "LAMBDASAGA_COMPENSATE_QUEUE_URL"
	EnvRetentionDays      = "LAMBDASAGA_RETENTION_DAYS"
	EnvDeadlineMargin     = "LAMBDASAGA_DEADLINE_MARGIN"
	// EnvChainSteps bounds the steps a record runs after its own, from
	// the state it holds (engine.CoordinatorConfig.ChainSteps); 0 turns
	// chains off, as for the first deploy of a release that brings them.
	EnvChainSteps = "LAMBDASAGA_CHAIN_STEPS"
	// EnvChainTime bounds how long a chain goes on starting steps
	// (engine.CoordinatorConfig.ChainTime), a Go duration.
	EnvChainTime = "LAMBDASAGA_CHAIN_TIME"
	// EnvStartQueueURL and EnvStartDeadLetterQueueURL name the start
	// queue the function reads (docs/START_QUEUE.md) and where it moves
	// the requests it refuses; both or neither.
	EnvStartQueueURL           = "LAMBDASAGA_START_QUEUE_URL"
	EnvStartDeadLetterQueueURL = "LAMBDASAGA_START_DEAD_LETTER_QUEUE_URL"
	// EnvBucket names the S3 bucket where values over EnvOffloadBytes
	// are kept as objects (engine.CoordinatorConfig.Objects); unset:
	// every value inline, within the state's limit.
	EnvBucket = "LAMBDASAGA_BUCKET"
	// EnvOffloadBytes is that threshold in bytes; default
	// engine.DefaultOffloadBytes.
	EnvOffloadBytes = "LAMBDASAGA_OFFLOAD_BYTES"
)

// startFromEnvironment builds the start queue's handler when the
// environment names the queue; nil, "" when it does not.
func startFromEnvironment(ctx context.Context, coord *engine.Coordinator, log *slog.Logger) (*startqueue.Handler, string, error) {
	url, dlq := os.Getenv(EnvStartQueueURL), os.Getenv(EnvStartDeadLetterQueueURL)
	switch {
	case url == "" && dlq == "":
		return nil, "", nil
	case url == "" || dlq == "":
		return nil, "", fmt.Errorf("environment: %s and %s go together", EnvStartQueueURL, EnvStartDeadLetterQueueURL)
	}
	name := url[strings.LastIndexByte(url, '/')+1:]
	if name == "" {
		return nil, "", fmt.Errorf("environment: %s=%q is not a queue URL", EnvStartQueueURL, url)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("aws config: %w", err)
	}
	h, err := startqueue.New(startqueue.Config{Sagas: coord, Logger: log,
		DeadLetters: &startqueue.SQSDeadLetters{Client: sqs.NewFromConfig(awsCfg), URL: dlq}})
	if err != nil {
		return nil, "", err
	}
	return h, name, nil
}

// objectsFromEnvironment is the object store EnvBucket names, and the
// threshold; nil and 0 without a bucket.
func objectsFromEnvironment(awsCfg aws.Config) (*s3objects.Objects, int, error) {
	bucket := os.Getenv(EnvBucket)
	if bucket == "" {
		return nil, 0, nil
	}
	threshold := 0
	if v := os.Getenv(EnvOffloadBytes); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, 0, fmt.Errorf("environment: %s=%q is not a positive number of bytes", EnvOffloadBytes, v)
		}
		threshold = n
	}
	objects, err := s3objects.New(s3objects.Config{Client: s3.NewFromConfig(awsCfg), Bucket: bucket})
	if err != nil {
		return nil, 0, err
	}
	return objects, threshold, nil
}

// valueCacheShare is the part of a function's memory its cache of large
// values may take, counted as encoded: decoded, a map of small values takes
// several times that, and the garbage collector lets the heap grow to twice
// what is live.
const valueCacheShare = 8

// valueCacheBytes bounds the values a function keeps in memory
// (engine.CoordinatorConfig.ValueCacheBytes) by its memory, memoryMB as
// Lambda gives it (AWS_LAMBDA_FUNCTION_MEMORY_SIZE); 0, the engine's
// default, outside Lambda or when the default is smaller.
func valueCacheBytes(memoryMB string) int64 {
	mb, err := strconv.ParseInt(memoryMB, 10, 64)
	if err != nil || mb <= 0 {
		return 0
	}
	return min(mb<<20/valueCacheShare, engine.DefaultValueCacheBytes)
}

// chainFromEnvironment reads the chain's budgets; zero where unset (the
// engine's defaults).
func chainFromEnvironment() (steps int, d time.Duration, err error) {
	if v := os.Getenv(EnvChainSteps); v != "" {
		if steps, err = strconv.Atoi(v); err != nil || steps < 0 {
			return 0, 0, fmt.Errorf("environment: %s=%q is not a number of steps (0 for no chains)", EnvChainSteps, v)
		}
		if steps == 0 {
			steps = -1 // the engine's zero is its default
		}
	}
	if v := os.Getenv(EnvChainTime); v != "" {
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			return 0, 0, fmt.Errorf("environment: %s=%q is not a positive duration", EnvChainTime, v)
		}
	}
	return steps, d, nil
}

// FromEnvironment builds a handler from the function's environment: the AWS
// clients (endpoints and credentials from the usual AWS variables, so
// AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_SQS point it at emulators),
// the DynamoDB store, the SQS queue and the coordinator. Actions are those
// in reg; `lambda:<function>` actions run through Lambda Invoke. Each batch
// writes its metrics to standard output in the embedded metric format
// (package emf). Call it once, outside the handler.
func FromEnvironment(ctx context.Context, reg *engine.Registry) (*Handler, error) {
	if reg == nil {
		// Without actions every record would fail and reach the
		// dead-letter queue.
		return nil, errors.New("sqshandler: FromEnvironment needs a registry (engine.NewRegistry(), with your actions)")
	}
	// Lambda's memory prices the work's compute (emf.EstimatedCost).
	memoryMB, _ := strconv.Atoi(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"))
	metrics := emf.New(emf.Config{MemoryMB: max(memoryMB, 0)})
	traces, err := tracingFromEnvironment(ctx)
	if err != nil {
		return nil, err
	}
	coord, log, margin, err := coordinatorFromEnvironment(ctx, reg, metrics, traces)
	if err != nil {
		return nil, err
	}
	start, startQueue, err := startFromEnvironment(ctx, coord, log)
	if err != nil {
		return nil, err
	}
	cfg := Config{Coordinator: coord, Logger: log, Margin: margin, Metrics: metrics, Start: start, StartQueue: startQueue}
	if traces != nil {
		cfg.Traces = traces
	}
	return New(cfg)
}

// CoordinatorFromEnvironment builds the coordinator FromEnvironment uses,
// with its logger and the deadline margin, for functions that are not SQS
// batch handlers (the sweep). A nil reg builds one that runs no actions.
func CoordinatorFromEnvironment(ctx context.Context, reg *engine.Registry) (*engine.Coordinator, *slog.Logger, time.Duration, error) {
	return coordinatorFromEnvironment(ctx, reg, nil, nil)
}

// coordinatorFromEnvironment builds the coordinator; with metrics, it
// hears its step events and counts its lost conditional writes; with
// traces, it opens spans (otelsaga) and its log lines carry their ids.
func coordinatorFromEnvironment(ctx context.Context, reg *engine.Registry, metrics *emf.Recorder, traces *sdktrace.TracerProvider) (*engine.Coordinator, *slog.Logger, time.Duration, error) {
	var missing []string
	get := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			missing = append(missing, name)
		}
		return v
	}
	table, advanceURL, compensateURL := get(EnvTable), get(EnvAdvanceQueueURL), get(EnvCompensateQueueURL)
	if len(missing) > 0 {
		return nil, nil, 0, fmt.Errorf("environment: %s not set", strings.Join(missing, ", "))
	}
	retention := 30 * 24 * time.Hour
	if v := os.Getenv(EnvRetentionDays); v != "" {
		days, err := strconv.Atoi(v)
		if err != nil || days < 1 {
			return nil, nil, 0, fmt.Errorf("environment: %s=%q is not a whole number of days", EnvRetentionDays, v)
		}
		retention = time.Duration(days) * 24 * time.Hour
	}
	margin := DefaultMargin
	if v := os.Getenv(EnvDeadlineMargin); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, nil, 0, fmt.Errorf("environment: %s=%q is not a positive duration", EnvDeadlineMargin, v)
		}
		margin = d
	}
	chainSteps, chainTime, err := chainFromEnvironment()
	if err != nil {
		return nil, nil, 0, err
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("aws config: %w", err)
	}
	objects, offloadBytes, err := objectsFromEnvironment(awsCfg)
	if err != nil {
		return nil, nil, 0, err
	}
	store, err := dynamo.New(dynamo.Config{Client: dynamodb.NewFromConfig(awsCfg), Table: table, Retention: retention})
	if err != nil {
		return nil, nil, 0, err
	}
	queue, err := sqsqueue.New(sqsqueue.Config{Client: sqs.NewFromConfig(awsCfg), URLs: map[durable.QueueName]string{
		durable.QueueAdvance: advanceURL, durable.QueueCompensate: compensateURL,
	}})
	if err != nil {
		return nil, nil, 0, err
	}
	var actions engine.Invoker // none for the sweep, which runs no action
	if reg != nil {
		invoker := &lambdaaction.Invoker{Client: awslambda.NewFromConfig(awsCfg)}
		if objects != nil {
			// An input over Lambda's payload limit goes by reference.
			invoker.LargeInputs = objects
		}
		reg.SetFallback(func(ctx context.Context, call saga.Call) (any, error) {
			if strings.HasPrefix(call.Action, lambdaaction.Prefix) {
				return invoker.Invoke(ctx, call)
			}
			return nil, saga.Permanent(saga.NewError(lang.ErrorTypeActionNotFound,
				fmt.Sprintf("no action %q in this function: register it in your advance function, or use lambda:<function>", call.Action)))
		})
		actions = reg
	}
	var lh slog.Handler = lambdacontext.NewLogHandler()
	if traces != nil {
		lh = otelsaga.LogHandler(lh)
	}
	log := slog.New(lh)
	cfg := engine.CoordinatorConfig{Store: store, Queue: queue, Actions: actions, Logger: log, ChainSteps: chainSteps, ChainTime: chainTime,
		OffloadBytes: offloadBytes}
	if objects != nil {
		cfg.Objects = objects // never a nil *s3objects.Objects in the interface
		cfg.ValueCacheBytes = valueCacheBytes(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"))
	}
	if traces != nil {
		cfg.Tracer = otelsaga.New(traces)
	}
	if metrics != nil {
		cfg.Store, cfg.OnStep, cfg.Queue = metrics.Store(store), metrics.OnStep, metrics.Queue(queue)
		if objects != nil {
			cfg.Objects = metrics.Objects(objects)
		}
	}
	coord, err := engine.NewCoordinator(cfg)
	if err != nil {
		return nil, nil, 0, err
	}
	return coord, log, margin, nil
}
