package lambdaaction_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/lambdaaction"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/objects/s3objects"
)

// largeInputs is a bucket of its own on S3 in process (gofakes3).
func largeInputs(t *testing.T) *s3objects.Objects {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	client := awslocal.S3(srv.URL)
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("values")}); err != nil {
		t.Fatal(err)
	}
	o, err := s3objects.New(s3objects.Config{Client: client, Bucket: "values"})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// readRef fetches an input sent by reference as the function would: a
// plain GET of its URL, checked against its size and hash.
func readRef(t *testing.T, ref map[string]any) string {
	t.Helper()
	url, _ := ref["url"].(string)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := sha256.Sum256(body)
	if resp.StatusCode != http.StatusOK || ref["bytes"] != float64(len(body)) || ref["sha256"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("GET input_ref: %d, %d bytes; ref %v", resp.StatusCode, len(body), ref)
	}
	return string(body)
}

// An input that would take a payload over Lambda's limit (6 MB for a
// synchronous invoke, 1 MB for an asynchronous one) goes by reference: the
// function gets input_ref, a URL that reads the input's JSON, and input
// null; under the limit it goes inline as always.
func TestLargeInputGoesByReference(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		token string
		ref   bool
	}{
		{"synchronous, under 6 MB", 5 << 20, "", false},
		{"synchronous, over 6 MB", 7 << 20, "", true},
		{"asynchronous, under 1 MB", 900 << 10, "lscb1_t", false},
		{"asynchronous, over 1 MB", 2 << 20, "lscb1_t", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeLambda{response: `{"ok": true}`}
			v := newInvoker(t, f)
			v.LargeInputs = largeInputs(t)
			doc := strings.Repeat("d", tc.size)
			call := saga.Call{SagaID: "s-1", Step: "scan", Action: "lambda:scan", Attempt: 1, IdempotencyKey: "k", Input: map[string]any{"doc": doc},
				CallbackToken: tc.token, CallbackTimeout: time.Hour}
			if _, err := v.Invoke(context.Background(), call); err != nil {
				t.Fatal(err)
			}
			c := f.calls()
			if len(c) != 1 {
				t.Fatalf("%d invocations", len(c))
			}
			ref, hasRef := c[0].payload["input_ref"].(map[string]any)
			if hasRef != tc.ref {
				t.Fatalf("input_ref %v, want %v", hasRef, tc.ref)
			}
			if !tc.ref {
				if in, _ := c[0].payload["input"].(map[string]any); in["doc"] != doc {
					t.Fatal("the input is not inline")
				}
				return
			}
			if c[0].payload["input"] != nil {
				t.Fatal("input and input_ref both sent")
			}
			if got := readRef(t, ref); got != `{"doc":"`+doc+`"}` {
				t.Fatalf("the referenced input is %d bytes, not the call's", len(got))
			}
		})
	}
}

// Without a bucket, an input over the limit fails the step for good,
// saying what to do; nothing is invoked.
func TestLargeInputWithoutABucketFailsForGood(t *testing.T) {
	f := &fakeLambda{response: `{}`}
	v := newInvoker(t, f)
	_, err := v.Invoke(context.Background(), saga.Call{SagaID: "s-1", Step: "scan", Action: "lambda:scan", Attempt: 1, IdempotencyKey: "k",
		Input: map[string]any{"doc": strings.Repeat("d", 7<<20)}})
	if !saga.IsPermanent(err) || saga.ErrorType(err) != lambdaaction.ErrorTypeInputTooLarge || !strings.Contains(err.Error(), "LAMBDASAGA_BUCKET") {
		t.Fatalf("%v: want a permanent InputTooLarge naming LAMBDASAGA_BUCKET", err)
	}
	if len(f.calls()) != 0 {
		t.Fatal("invoked anyway")
	}
}

// A synchronous invoke Lambda refuses as too large can never succeed:
// the step fails for good rather than retrying it.
func TestSynchronousInvokeTooLargeFailsForGood(t *testing.T) {
	f := &fakeLambda{errType: "RequestTooLargeException", status: http.StatusRequestEntityTooLarge}
	v := newInvoker(t, f)
	_, err := v.Invoke(context.Background(), saga.Call{SagaID: "s-1", Step: "scan", Action: "lambda:scan", Attempt: 1, IdempotencyKey: "k", Input: map[string]any{}})
	if !saga.IsPermanent(err) {
		t.Fatalf("%v: want permanent", err)
	}
}
