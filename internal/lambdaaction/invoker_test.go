package lambdaaction_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/lambdasaga/lambdasaga/internal/lambdaaction"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func TestDecode(t *testing.T) {
	out, err := lambdaaction.Decode(nil, []byte(`{"id": "p-1", "cents": 1200, "rate": 1.5}`))
	m, _ := out.(map[string]any)
	if err != nil || m["id"] != "p-1" || m["cents"] != int64(1200) || m["rate"] != 1.5 {
		t.Fatalf("%#v %v", out, err)
	}
	if out, err := lambdaaction.Decode(nil, nil); out != nil || err != nil {
		t.Fatalf("empty payload: %v %v", out, err)
	}
	_, err = lambdaaction.Decode(aws.String("Handled"), []byte(`{"errorType": "CardDeclined", "errorMessage": "no funds"}`))
	var ae *saga.ActionError
	if !errors.As(err, &ae) || ae.Type != "CardDeclined" || ae.Message != "no funds" || saga.IsPermanent(err) {
		t.Fatalf("function error: %v (typed, not permanent by itself: retry.permanent decides)", err)
	}
	_, err = lambdaaction.Decode(aws.String("Unhandled"), []byte(`not json`))
	if saga.ErrorType(err) != "Unhandled" {
		t.Fatalf("crash: %v", err)
	}
	if _, err = lambdaaction.Decode(nil, []byte(`{oops`)); !saga.IsPermanent(err) || saga.ErrorType(err) != lang.ErrorTypeOutputFormat {
		t.Fatalf("bad output: %v", err)
	}
}

// fakeLambda speaks the Lambda Invoke API (POST
// /2015-03-31/functions/NAME/invocations) and records what it was sent.
type fakeLambda struct {
	mu       sync.Mutex
	invoked  []invocation
	status   int    // the status to answer; 0: 200 for RequestResponse, 202 for Event
	errType  string // set: answer this error (X-Amzn-ErrorType) with status
	response string // the function's output for a synchronous invoke
}

type invocation struct {
	function, invocationType string
	payload                  map[string]any
}

func (f *fakeLambda) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/")
	name, ok2 := strings.CutSuffix(name, "/invocations")
	body, _ := io.ReadAll(r.Body)
	var payload map[string]any
	if r.Method != http.MethodPost || !ok || !ok2 || json.Unmarshal(body, &payload) != nil {
		http.Error(w, "not an Invoke", http.StatusBadRequest)
		return
	}
	typ := r.Header.Get("X-Amz-Invocation-Type")
	f.mu.Lock()
	f.invoked = append(f.invoked, invocation{function: name, invocationType: typ, payload: payload})
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if f.errType != "" {
		w.Header().Set("X-Amzn-ErrorType", f.errType)
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, `{"Type": "User", "message": "refused by the fake"}`)
		return
	}
	if typ == "Event" {
		w.WriteHeader(http.StatusAccepted) // queued; no body
		return
	}
	_, _ = io.WriteString(w, f.response)
}

func (f *fakeLambda) calls() []invocation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.invoked)
}

func newInvoker(t *testing.T, f *fakeLambda) *lambdaaction.Invoker {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return &lambdaaction.Invoker{Client: awslambda.New(awslambda.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
	})}
}

// A step without callback is invoked synchronously: its output is the
// function's, and no token is sent.
func TestSynchronousInvoke(t *testing.T) {
	f := &fakeLambda{response: `{"charged": 1200}`}
	v := newInvoker(t, f)
	out, err := v.Invoke(context.Background(), saga.Call{SagaID: "s-1", Step: "charge", Action: "lambda:charge", Attempt: 1, IdempotencyKey: "k", Input: map[string]any{"cents": 1200}})
	if m, _ := out.(map[string]any); err != nil || m["charged"] != int64(1200) {
		t.Fatalf("%#v %v", out, err)
	}
	c := f.calls()
	if len(c) != 1 || c[0].function != "charge" || c[0].invocationType == "Event" {
		t.Fatalf("invocations %+v: want one synchronous invoke of charge", c)
	}
	if _, ok := c[0].payload["callback_token"]; ok || c[0].payload["saga_id"] != "s-1" {
		t.Fatalf("payload %v: want the call, without callback_token", c[0].payload)
	}
}

// A step with callback is invoked with InvocationType Event: Lambda
// answers 202, the action's output is null, and the payload carries the
// token and its timeout.
func TestCallbackInvokesAsynchronously(t *testing.T) {
	f := &fakeLambda{}
	v := newInvoker(t, f)
	call := saga.Call{SagaID: "s-1", Step: "pay", Action: "lambda:provider", Attempt: 2, IdempotencyKey: "k-pay", Input: map[string]any{"cents": 1200},
		CallbackToken: "lscb1_token", CallbackTimeout: 90 * time.Minute}
	out, err := v.Invoke(context.Background(), call)
	if out != nil || err != nil {
		t.Fatalf("async invoke: %#v %v; want null output, no error", out, err)
	}
	c := f.calls()
	if len(c) != 1 || c[0].function != "provider" || c[0].invocationType != "Event" {
		t.Fatalf("invocations %+v: want one Event invoke of provider", c)
	}
	p := c[0].payload
	in, _ := p["input"].(map[string]any)
	if p["callback_token"] != "lscb1_token" || p["callback_timeout_ms"] != float64(90*60*1000) || p["saga_id"] != "s-1" || p["step"] != "pay" ||
		p["attempt"] != float64(2) || p["idempotency_key"] != "k-pay" || in["cents"] != float64(1200) {
		t.Fatalf("payload %v", p)
	}
}

// An asynchronous invoke Lambda refuses fails the attempt: retryable
// (the step's retry applies) unless the request itself can never succeed.
func TestCallbackInvokeErrors(t *testing.T) {
	for _, tc := range []struct {
		status    int
		errType   string
		permanent bool
	}{
		{http.StatusRequestEntityTooLarge, "RequestTooLargeException", true},
		{http.StatusBadRequest, "InvalidRequestContentException", true},
		{http.StatusNotFound, "ResourceNotFoundException", false},
		{http.StatusTooManyRequests, "TooManyRequestsException", false},
		{http.StatusForbidden, "AccessDeniedException", false},
		{http.StatusInternalServerError, "ServiceException", false},
	} {
		t.Run(tc.errType, func(t *testing.T) {
			f := &fakeLambda{status: tc.status, errType: tc.errType}
			v := newInvoker(t, f)
			out, err := v.Invoke(context.Background(), saga.Call{SagaID: "s-1", Step: "pay", Action: "lambda:provider", Attempt: 1, CallbackToken: "lscb1_t", CallbackTimeout: time.Hour})
			if err == nil || out != nil {
				t.Fatalf("%#v %v: want an error", out, err)
			}
			if saga.IsPermanent(err) != tc.permanent {
				t.Fatalf("%v: permanent %v, want %v", err, saga.IsPermanent(err), tc.permanent)
			}
			if tc.permanent && saga.ErrorType(err) != tc.errType {
				t.Fatalf("%v: type %q, want %q (retry.permanent and catch match it)", err, saga.ErrorType(err), tc.errType)
			}
			if len(f.calls()) != 1 {
				t.Fatalf("%d invokes, want 1", len(f.calls()))
			}
		})
	}
}
