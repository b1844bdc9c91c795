// Package lambdaaction runs `lambda:<function>` actions with Lambda Invoke.
// The function receives {saga_id, step, attempt, idempotency_key, input}
// and returns its output as JSON. A function error becomes the step's
// error, typed by its errorType, so retry.permanent and catch match it.
package lambdaaction

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/lang"
	"github.com/lambdasaga/lambdasaga/saga"
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
}

// Invoke implements engine.Invoker.
func (v *Invoker) Invoke(ctx context.Context, call saga.Call) (any, error) {
	fn, ok := strings.CutPrefix(call.Action, Prefix)
	if !ok || fn == "" {
		return nil, saga.Permanent(saga.NewError(lang.ErrorTypeActionNotFound, fmt.Sprintf("action %q is not a lambda: action", call.Action)))
	}
	payload, err := json.Marshal(request{SagaID: call.SagaID, Step: call.Step, Attempt: call.Attempt, IdempotencyKey: call.IdempotencyKey, Compensation: call.Compensation, Input: call.Input})
	if err != nil {
		return nil, saga.Permanent(fmt.Errorf("action %s: encode input: %w", call.Action, err))
	}
	out, err := v.Client.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String(fn), Payload: payload})
	if err != nil {
		// The call may not have reached the function, or may have: retryable,
		// and the idempotency key makes a repeat safe.
		return nil, fmt.Errorf("invoke %s: %w", fn, err)
	}
	return Decode(out.FunctionError, out.Payload)
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
