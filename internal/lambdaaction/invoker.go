// Package lambdaaction runs `lambda:<function>` actions with Lambda Invoke.
// The function receives {saga_id, step, attempt, idempotency_key,
// compensation, input} and returns its output as JSON. A function error
// becomes the step's error, typed by its errorType, so retry.permanent and
// catch match it.
//
// An input that would take the payload over Lambda's limit (6 MB for a
// synchronous invoke, 1 MB for an asynchronous one) is put in the
// deployment's bucket (LAMBDASAGA_BUCKET) under its saga's id and its
// SHA-256, and the function receives input_ref {url, bytes, sha256} with
// input null: the URL reads the input's JSON with a plain GET, no
// credentials, for 6 hours (or until the credentials of the role that
// signed it expire). Without a bucket such a call fails for good
// (InputTooLarge). A function's own response is limited to 6 MB by
// Lambda: an output larger than that must go elsewhere (say, S3), its key
// in the output.
//
// A step with callback is invoked asynchronously (InvocationType Event):
// Lambda queues the event and answers 202 at once, so the saga's function
// is not billed while the action works. The payload also carries
// callback_token and callback_timeout_ms; the function (or whatever it
// hands the work to) completes or fails the token when the work is done
// (engine.Coordinator.CompleteCallback, FailCallback), within the timeout.
// The action's own output is then null: the step's out is what the
// completion brings. The function's return value and its errors are not
// seen by the saga: Lambda keeps them (its logs, an on-failure
// destination); the saga sees the token completed, failed, or timed out.
//
// Lambda retries an asynchronous invocation whose function returns an
// error twice by default, and may deliver one event more than once even
// without an error (Lambda API Reference, Invoke; Developer Guide,
// "Configuring error handling settings for Lambda asynchronous
// invocations": MaximumRetryAttempts 0 to 2, MaximumEventAgeInSeconds up
// to 6 hours). Every copy carries the same token and idempotency key: a
// token completed twice is applied once (the second completion is a
// duplicate), and one completed after its attempt timed out is refused
// (saga.ErrTokenNotAwaited), so duplicates are safe. The saga's retry
// policy is the step's retry: set the action function's MaximumRetryAttempts
// to 0, have it fail the token on an error it knows (FailCallback: the
// step's retry and catch apply), and set MaximumEventAgeInSeconds below the
// callback's timeout, so that an event Lambda could not run in time is
// dropped rather than run for an attempt that has already timed out.
package lambdaaction

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Lambda's invoke payload limits (Lambda Developer Guide, "Lambda
// quotas": 6 MB for a synchronous invocation's request, 1 MB for an
// asynchronous one's). A call whose payload is over its limit sends its
// input by reference (Invoker.LargeInputs).
const (
	MaxSyncPayloadBytes  = 6 << 20
	MaxAsyncPayloadBytes = 1 << 20
)

// InputURLTTL is how long the URL of an input sent by reference reads it:
// an asynchronous event may wait up to 6 hours for its function
// (MaximumEventAgeInSeconds).
const InputURLTTL = 6 * time.Hour

// LargeInputs keeps an input too large for an Invoke payload, and makes a
// URL that reads it: objects/s3objects.Objects, on the bucket the saga's
// large values go to.
type LargeInputs interface {
	ObjectPut(ctx context.Context, p *durable.ObjectPutParams) error
	PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error)
}

// InputRef is what a function receives in place of its input when the
// payload with the input inline would be over Lambda's limit: a URL that
// reads the input's JSON with a plain GET (no credentials), its size and
// its SHA-256, to check it against.
type InputRef struct {
	URL    string `json:"url"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Prefix marks an action run by Lambda Invoke: "lambda:my-function" or
// "lambda:arn:aws:lambda:...".
const Prefix = "lambda:"

// Invoker calls Lambda functions for lambda: actions.
type Invoker struct {
	Client *awslambda.Client // makes the Invoke calls; required
	// LargeInputs, when set, keeps an input that would take the payload
	// over Lambda's limit, and the function receives input_ref (an
	// InputRef) instead of input. Nil: such a call fails for good
	// (InputTooLarge).
	LargeInputs LargeInputs
}

var _ engine.Invoker = (*Invoker)(nil)

type request struct {
	SagaID         string `json:"saga_id"`
	Step           string `json:"step"`
	Attempt        int    `json:"attempt"`
	IdempotencyKey string `json:"idempotency_key"`
	Compensation   bool   `json:"compensation"`
	Input          any    `json:"input"`
	// InputRef replaces Input when the payload would be over Lambda's
	// limit; Input is then null.
	InputRef *InputRef `json:"input_ref,omitempty"`
	// Set for a step with callback (invoked asynchronously), else absent.
	CallbackToken     string `json:"callback_token,omitempty"`
	CallbackTimeoutMS int64  `json:"callback_timeout_ms,omitempty"`
}

// Invoke implements engine.Invoker.
func (v *Invoker) Invoke(ctx context.Context, call saga.Call) (any, error) {
	fn, ok := strings.CutPrefix(call.Action, Prefix)
	if !ok || fn == "" {
		return nil, saga.Permanent(saga.NewError(lang.ErrorTypeActionNotFound, fmt.Sprintf("action %q is not a lambda: action", call.Action)))
	}
	req := request{SagaID: call.SagaID, Step: call.Step, Attempt: call.Attempt, IdempotencyKey: call.IdempotencyKey, Compensation: call.Compensation, Input: call.Input,
		CallbackToken: call.CallbackToken, CallbackTimeoutMS: call.CallbackTimeout.Milliseconds()}
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, saga.Permanent(fmt.Errorf("action %s: encode input: %w", call.Action, err))
	}
	limit := MaxSyncPayloadBytes
	if call.CallbackToken != "" {
		limit = MaxAsyncPayloadBytes
	}
	if len(payload) > limit {
		if payload, err = v.byReference(ctx, call, req, len(payload), limit); err != nil {
			return nil, err
		}
	}
	if call.CallbackToken != "" {
		return nil, v.invokeAsync(ctx, fn, payload)
	}
	out, err := v.Client.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String(fn), Payload: payload})
	if err != nil {
		err = fmt.Errorf("invoke %s: %w", fn, err)
		if cannotSucceed(err) {
			var api smithy.APIError
			errors.As(err, &api)
			return nil, saga.Permanent(saga.NewError(api.ErrorCode(), err.Error()))
		}
		// The call may not have reached the function, or may have: retryable,
		// and the idempotency key makes a repeat safe.
		return nil, err
	}
	return Decode(out.FunctionError, out.Payload)
}

// byReference keeps the call's input as an object and returns the payload
// with a URL that reads it in its place.
func (v *Invoker) byReference(ctx context.Context, call saga.Call, req request, size, limit int) ([]byte, error) {
	if v.LargeInputs == nil {
		return nil, saga.Permanent(saga.NewError(ErrorTypeInputTooLarge, fmt.Sprintf(
			"action %s: the payload is %d bytes, over Lambda's %d-byte limit for this invocation: give the functions a bucket (LAMBDASAGA_BUCKET) to send the input by reference", call.Action, size, limit)))
	}
	in, err := json.Marshal(call.Input)
	if err != nil {
		return nil, saga.Permanent(fmt.Errorf("action %s: encode input: %w", call.Action, err))
	}
	if len(in) > durable.MaxObjectBytes {
		return nil, saga.Permanent(saga.NewError(ErrorTypeInputTooLarge, fmt.Sprintf("action %s: the input is %d bytes, over %d", call.Action, len(in), durable.MaxObjectBytes)))
	}
	sum := sha256.Sum256(in)
	key := durable.ObjectKey(call.SagaID, sum)
	// Content-addressed: a retry puts the same bytes under the same key.
	if err := v.LargeInputs.ObjectPut(ctx, &durable.ObjectPutParams{Key: key, Body: in}); err != nil {
		return nil, fmt.Errorf("action %s: keep the input by reference: %w", call.Action, err)
	}
	url, err := v.LargeInputs.PresignGet(ctx, key, InputURLTTL)
	if err != nil {
		return nil, fmt.Errorf("action %s: %w", call.Action, err)
	}
	req.Input, req.InputRef = nil, &InputRef{URL: url, Bytes: len(in), SHA256: hex.EncodeToString(sum[:])}
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, saga.Permanent(fmt.Errorf("action %s: encode the call: %w", call.Action, err))
	}
	return payload, nil
}

// ErrorTypeInputTooLarge is the error type of a call whose input cannot
// be sent to its function: over Lambda's payload limit with no bucket to
// send it by reference, or over durable.MaxObjectBytes.
const ErrorTypeInputTooLarge = "InputTooLarge"

// invokeAsync queues the event for a step with callback. Lambda answers
// 202 once the event is queued; the action's output is null.
func (v *Invoker) invokeAsync(ctx context.Context, fn string, payload []byte) error {
	_, err := v.Client.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String(fn), InvocationType: lambdatypes.InvocationTypeEvent, Payload: payload})
	if err == nil {
		return nil
	}
	err = fmt.Errorf("invoke %s asynchronously: %w", fn, err)
	if cannotSucceed(err) {
		var api smithy.APIError
		errors.As(err, &api)
		return saga.Permanent(saga.NewError(api.ErrorCode(), err.Error()))
	}
	// Throttled, a service error, or the answer lost: the attempt fails and
	// the step's retry applies. If the event was queued after all, its
	// token is the old attempt's, which the saga refuses once it retries.
	return err
}

// cannotSucceed tells the errors of an invoke that no retry can mend: the
// request itself is refused (too large: 1 MB for an asynchronous invoke;
// malformed). A missing function or a denied one is left retryable: a
// deployment or a policy can still mend them within the step's retries.
func cannotSucceed(err error) bool {
	var tooLarge *lambdatypes.RequestTooLargeException
	var badContent *lambdatypes.InvalidRequestContentException
	var badParam *lambdatypes.InvalidParameterValueException
	return errors.As(err, &tooLarge) || errors.As(err, &badContent) || errors.As(err, &badParam)
}

// Decode turns a Lambda response into an action result: the payload as
// JSON values, or, with a function error, an engine error of its errorType.
func Decode(functionError *string, payload []byte) (any, error) {
	if functionError != nil {
		var fe struct {
			ErrorType    string `json:"errorType"`
			ErrorMessage string `json:"errorMessage"`
		}
		_ = json.Unmarshal(payload, &fe)
		if fe.ErrorType == "" {
			fe.ErrorType = *functionError // "Unhandled" for a crash or timeout
		}
		return nil, saga.NewError(fe.ErrorType, fe.ErrorMessage)
	}
	if len(bytes.TrimSpace(payload)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, saga.Permanent(saga.NewError(lang.ErrorTypeOutputFormat, "function returned invalid JSON: "+err.Error()))
	}
	return saga.NormalizeJSON(v)
}
