// Package lambdaaction runs `lambda:<function>` actions with Lambda Invoke.
// The function receives {saga_id, step, attempt, idempotency_key,
// compensation, input} and returns its output as JSON. A function error
// becomes the step's error, typed by its errorType, so retry.permanent and
// catch match it.
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
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Prefix marks an action run by Lambda Invoke: "lambda:my-function" or
// "lambda:arn:aws:lambda:...".
const Prefix = "lambda:"

// Invoker calls Lambda functions for lambda: actions.
type Invoker struct {
	Client *awslambda.Client // makes the Invoke calls; required
}

var _ engine.Invoker = (*Invoker)(nil)

type request struct {
	SagaID         string `json:"saga_id"`
	Step           string `json:"step"`
	Attempt        int    `json:"attempt"`
	IdempotencyKey string `json:"idempotency_key"`
	Compensation   bool   `json:"compensation"`
	Input          any    `json:"input"`
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
	payload, err := json.Marshal(request{SagaID: call.SagaID, Step: call.Step, Attempt: call.Attempt, IdempotencyKey: call.IdempotencyKey, Compensation: call.Compensation, Input: call.Input,
		CallbackToken: call.CallbackToken, CallbackTimeoutMS: call.CallbackTimeout.Milliseconds()})
	if err != nil {
		return nil, saga.Permanent(fmt.Errorf("action %s: encode input: %w", call.Action, err))
	}
	if call.CallbackToken != "" {
		return nil, v.invokeAsync(ctx, fn, payload)
	}
	out, err := v.Client.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String(fn), Payload: payload})
	if err != nil {
		// The call may not have reached the function, or may have: retryable,
		// and the idempotency key makes a repeat safe.
		return nil, fmt.Errorf("invoke %s: %w", fn, err)
	}
	return Decode(out.FunctionError, out.Payload)
}

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
