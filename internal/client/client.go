// Package client starts and inspects sagas from a service: it registers a
// definition, writes the saga's first version (idempotently by saga id)
// and sends its first message; the Lambda functions do the rest. It also
// sends sagas their signals and completes their callback tokens.
package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/bulk"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/redrive"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/objects/s3objects"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// Config wires a Client to a store and a queue.
type Config struct {
	// Store holds the definitions and sagas; required.
	Store durable.Store
	// Queue carries the sagas' messages to the workers; required.
	Queue durable.Queue
	// Objects holds the sagas' values kept by reference (the functions'
	// LAMBDASAGA_BUCKET); nil: a saga holding such values shows
	// references and cannot be acted on.
	Objects durable.Objects
	// DeadLetters finds the queues' dead letters for Redrive; nil: the
	// client redrives none.
	DeadLetters redrive.Finder
}

// AWSConfig wires a Client to a deployed stack (see the template's outputs).
type AWSConfig struct {
	// AWS is the SDK configuration (region, credentials) both clients
	// are built from.
	AWS aws.Config
	// Table is the DynamoDB table's name, the stack's output TableName;
	// required.
	Table string
	// AdvanceQueueURL is the stack's output AdvanceQueueUrl; required.
	AdvanceQueueURL string
	// CompensateQueueURL is the stack's output CompensateQueueUrl;
	// required.
	CompensateQueueURL string
	// DynamoDBEndpoint and SQSEndpoint, when set, point at emulators.
	DynamoDBEndpoint, SQSEndpoint string
	// Bucket is the stack's output ValuesBucketName (Config.Objects on
	// S3); S3Endpoint, when set, points at an S3 emulator.
	Bucket, S3Endpoint string
	// StartQueueURL is the stack's output StartQueueUrl: Redrive takes
	// the start queue's dead letters too when it is set.
	StartQueueURL string
}

// Client starts, reads, signals, cancels and resumes sagas, and completes
// their callback tokens. It runs no actions.
type Client struct {
	coord       *engine.Coordinator
	plans       *engine.Plans
	deadLetters redrive.Finder
}

// New returns a client on the given store and queue.
func New(cfg Config) (*Client, error) {
	if cfg.Store == nil || cfg.Queue == nil {
		return nil, errors.New("client: a Store and a Queue are required")
	}
	plans := engine.NewPlans(cfg.Store, saga.Options{})
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: cfg.Store, Queue: cfg.Queue, Plans: plans, Objects: cfg.Objects})
	if err != nil {
		return nil, err
	}
	return &Client{coord: coord, plans: plans, deadLetters: cfg.DeadLetters}, nil
}

// NewAWS returns a client on DynamoDB and SQS.
func NewAWS(cfg AWSConfig) (*Client, error) {
	if cfg.Table == "" || cfg.AdvanceQueueURL == "" || cfg.CompensateQueueURL == "" {
		return nil, errors.New("client: the table and both queue URLs are required (the stack's outputs TableName, AdvanceQueueUrl, CompensateQueueUrl)")
	}
	ddb := dynamodb.NewFromConfig(cfg.AWS, func(o *dynamodb.Options) {
		if cfg.DynamoDBEndpoint != "" {
			o.BaseEndpoint = aws.String(cfg.DynamoDBEndpoint)
		}
	})
	sq := sqs.NewFromConfig(cfg.AWS, func(o *sqs.Options) {
		if cfg.SQSEndpoint != "" {
			o.BaseEndpoint = aws.String(cfg.SQSEndpoint)
		}
	})
	store, err := dynamo.New(dynamo.Config{Client: ddb, Table: cfg.Table})
	if err != nil {
		return nil, err
	}
	queue, err := sqsqueue.New(sqsqueue.Config{Client: sq, URLs: map[durable.QueueName]string{durable.QueueAdvance: cfg.AdvanceQueueURL, durable.QueueCompensate: cfg.CompensateQueueURL}})
	if err != nil {
		return nil, err
	}
	var objects durable.Objects
	if cfg.Bucket != "" {
		s3c := s3.NewFromConfig(cfg.AWS, func(o *s3.Options) {
			if cfg.S3Endpoint != "" {
				o.BaseEndpoint, o.UsePathStyle = aws.String(cfg.S3Endpoint), true
			}
		})
		if objects, err = s3objects.New(s3objects.Config{Client: s3c, Bucket: cfg.Bucket}); err != nil {
			return nil, err
		}
	}
	deadLetters := redrive.SQSStack(sq, cfg.AdvanceQueueURL, cfg.CompensateQueueURL, cfg.StartQueueURL)
	return New(Config{Store: store, Queue: queue, Objects: objects, DeadLetters: deadLetters})
}

// StartParams names the definition (source and file name, for messages),
// or a deployed saga by name, the saga id (empty: a random one) and the
// input.
type StartParams struct {
	// File names the definition in problems ("order.yaml:12:5: ...").
	File string
	// Definition is the definition's YAML source (or its bundle,
	// saga.Plan.Source); empty: the current version of Name.
	Definition []byte
	// Name, when Definition is empty, names a deployed saga (Deploy): the
	// start runs its current version.
	Name string
	// SagaID identifies the saga: 1 to 128 letters, digits, '_', '.',
	// ':' or '-', starting with a letter or digit; empty: 32 random hex
	// digits.
	SagaID string
	// Input is the saga's input, checked against the definition's
	// declared input; nil is an empty object.
	Input map[string]any
}

// Start validates the definition, registers it, writes the saga's first
// version and sends its first message; without a definition, it starts
// the current version of the deployed saga Name (an unknown name is
// durable.ErrNotFound). Starting a saga id again with the same definition
// (or name) and input returns the existing saga; with a different one it
// is durable.ErrExists.
func (c *Client) Start(ctx context.Context, p StartParams) (*saga.State, error) {
	ep, err := c.startParams(p)
	if err != nil {
		return nil, err
	}
	return c.coord.Start(ctx, ep)
}

func (c *Client) startParams(p StartParams) (*engine.StartParams, error) {
	ep := &engine.StartParams{Name: p.Name, SagaID: p.SagaID, Input: p.Input}
	if len(p.Definition) > 0 {
		plan, err := saga.Compile(p.File, p.Definition, saga.Options{})
		if err != nil {
			return nil, err
		}
		ep.Plan = plan
	}
	return ep, nil
}

// Deploy stores a compiled definition and the child sagas it bundles and
// makes each the current version of its name, which starts by name run
// from then on (engine.Coordinator.Deploy); sagas in flight keep theirs.
func (c *Client) Deploy(ctx context.Context, plan *saga.Plan) ([]engine.Deployed, error) {
	return c.coord.Deploy(ctx, plan)
}

// SignalWithStart starts the saga start describes unless a saga of its id
// (required) exists, and sends it the signal name with payload either way
// (engine.Coordinator.SignalWithStart): a saga that exists is signalled
// whatever its input. With SignalID, a retry delivers the signal once.
func (c *Client) SignalWithStart(ctx context.Context, start StartParams, name string, payload any, opts ...SignalOption) (*engine.SignalWithStartResult, error) {
	ep, err := c.startParams(start)
	if err != nil {
		return nil, err
	}
	p := &engine.SignalWithStartParams{Start: *ep, Signal: engine.SignalParams{SagaID: start.SagaID, Name: name, Payload: payload}}
	for _, o := range opts {
		o(&p.Signal)
	}
	return c.coord.SignalWithStart(ctx, p)
}

// Status reads a saga.
func (c *Client) Status(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.coord.Get(ctx, sagaID)
}

// Step returns the id of a saga's step by its index, for displaying state.
func (c *Client) Step(ctx context.Context, st *saga.State, index int) (string, error) {
	plan, err := c.plans.Get(ctx, st.DefinitionHash)
	if err != nil {
		return "", err
	}
	steps := plan.Steps()
	if index < 0 || index >= len(steps) {
		return "", fmt.Errorf("step index %d out of range", index)
	}
	return steps[index].ID, nil
}

// Fork reports the fork a saga waits on: its children, how many have
// ended, and each lane's current one; nil when it waits on none.
func (c *Client) Fork(ctx context.Context, sagaID string) (*engine.ForkStatus, error) {
	return c.coord.Fork(ctx, sagaID)
}

// Cancel stops a running saga; it compensates.
func (c *Client) Cancel(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.coord.Cancel(ctx, sagaID)
}

// Resume continues the compensation of a saga parked in compensation_failed.
func (c *Client) Resume(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.coord.Resume(ctx, sagaID)
}

// SkipCompensation continues a parked saga without the compensation that
// failed, which an operator has undone by hand.
func (c *Client) SkipCompensation(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.coord.SkipCompensation(ctx, sagaID)
}

// Retry runs the step a held saga failed on again, with a fresh attempt
// budget (engine.Coordinator.Retry).
func (c *Client) Retry(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.coord.Retry(ctx, sagaID)
}

// Compensate compensates a held saga (engine.Coordinator.Compensate).
func (c *Client) Compensate(ctx context.Context, sagaID string) (*saga.State, error) {
	return c.coord.Compensate(ctx, sagaID)
}

// List pages through sagas, those that entered their status most recently
// first (durable.SagaListParams).
func (c *Client) List(ctx context.Context, p *durable.SagaListParams) (*durable.SagaListResult, error) {
	return c.coord.List(ctx, p)
}

// Sweep re-sends the stored outbox of unfinished sagas idle for at least
// p.IdleFor, at most p.MaxResends times per version (see
// engine.Coordinator.Sweep).
func (c *Client) Sweep(ctx context.Context, p *engine.SweepParams) (*engine.SweepResult, error) {
	return c.coord.Sweep(ctx, p)
}

// Plan returns the compiled definition a saga runs, for displaying its
// state (its steps, what a pause waits on).
func (c *Client) Plan(ctx context.Context, st *saga.State) (*saga.Plan, error) {
	return c.plans.Get(ctx, st.DefinitionHash)
}

// SignalOption sets something of a signal beyond its saga, name and payload.
type SignalOption func(*engine.SignalParams)

// SignalID makes a signal idempotent: sent again with the same id (a retry
// after a timeout, say), it is taken once, and the repeat's receipt is
// saga.ReceiptDuplicate. Without it each signal gets a random id.
func SignalID(id string) SignalOption {
	return func(p *engine.SignalParams) { p.ID = id }
}

// Signal sends the signal name to a saga, with payload (any JSON-able
// value, json.RawMessage for JSON text; at most lang.MaxSignalBytes as
// JSON). A saga awaiting it goes on at once, the payload in the await's
// out (the receipt is saga.ReceiptApplied); a running saga that does not
// await it yet keeps it for its first await of that name
// (saga.ReceiptKept). Errors: durable.ErrNotFound (no such saga),
// saga.ErrNotReceiving (compensating or final), saga.ErrKeptFull (it keeps
// as many signals as it may), saga.ErrBadDelivery (a bad name, id or
// payload); each leaves the saga unchanged.
func (c *Client) Signal(ctx context.Context, sagaID, name string, payload any, opts ...SignalOption) (*engine.Delivered, error) {
	p := &engine.SignalParams{SagaID: sagaID, Name: name, Payload: payload}
	for _, o := range opts {
		o(p)
	}
	return c.coord.Signal(ctx, p)
}

// CompleteCallback completes a callback token (saga.Call.CallbackToken)
// with the step's output, which replaces the action's immediate output in
// the step's out: the step goes on. Completing a token twice applies it
// once (the second receipt is saga.ReceiptDuplicate); a completion that
// comes while the action that got the token still runs is kept, and taken
// when it returns. Errors: saga.ErrBadToken (not a token the saga issued),
// saga.ErrTokenNotAwaited (an earlier visit or attempt, or one timed out),
// saga.ErrNotReceiving (the saga compensates or is final),
// durable.ErrNotFound, saga.ErrBadDelivery (a bad output).
func (c *Client) CompleteCallback(ctx context.Context, token string, output any) (*engine.Delivered, error) {
	return c.coord.CompleteCallback(ctx, token, output)
}

// FailCallback fails a callback token's attempt with an error type, which
// retry.permanent and catch match, and a message: the step retries with a
// new attempt and a new token, or fails and the saga compensates, this step
// included (its action returned: its work may have happened). Errors as
// CompleteCallback's; an empty errorType is saga.ErrBadDelivery.
func (c *Client) FailCallback(ctx context.Context, token, errorType, message string) (*engine.Delivered, error) {
	return c.coord.FailCallback(ctx, token, errorType, message)
}

// Bulk acts on every saga p matches (package bulk): a listing paged
// through, each match read and acted on with p.Verb (bulk.VerbNamed),
// p.Progress told as it goes.
func (c *Client) Bulk(ctx context.Context, p bulk.Params) (*bulk.Result, error) {
	return bulk.Run(ctx, c.coord, p)
}

// Pause stores a pause (engine.Coordinator.Pause).
func (c *Client) Pause(ctx context.Context, p *engine.PauseParams) error {
	return c.coord.Pause(ctx, p)
}

// Unpause deletes a pause: durable.ErrNotFound when there is none.
func (c *Client) Unpause(ctx context.Context, kind durable.PauseKind, target string) error {
	return c.coord.Unpause(ctx, kind, target)
}

// Pauses lists the pauses stored, expired ones included.
func (c *Client) Pauses(ctx context.Context) ([]durable.Pause, error) {
	return c.coord.Pauses(ctx)
}

// PausedBy returns the pause that holds the step st waits on, if one
// does now: what status shows for a paused saga.
func (c *Client) PausedBy(ctx context.Context, st *saga.State) (durable.Pause, bool, error) {
	return c.coord.PausedBy(ctx, st)
}
