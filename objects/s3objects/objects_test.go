package s3objects_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/objects/objectstest"
	"github.com/lambdasaga/lambdasaga/objects/s3objects"
)

// emulator is S3 in process (gofakes3 on memory) for one test.
func emulator(t *testing.T) *s3.Client {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	return awslocal.S3(srv.URL)
}

var buckets atomic.Int64

// newObjects is an Objects on a bucket of its own.
func newObjects(t *testing.T, client *s3.Client, prefix string) *s3objects.Objects {
	t.Helper()
	bucket := fmt.Sprintf("sagas-%d", buckets.Add(1))
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	o, err := s3objects.New(s3objects.Config{Client: client, Bucket: bucket, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestConformance(t *testing.T) {
	t.Parallel()
	client := emulator(t)
	objectstest.Exercise(t, func(t *testing.T) durable.Objects { return newObjects(t, client, "") })
}

func TestConformanceUnderPrefix(t *testing.T) {
	t.Parallel()
	client := emulator(t)
	objectstest.Exercise(t, func(t *testing.T) durable.Objects { return newObjects(t, client, "sagas/") })
}

func TestMissingBucketIsNoNotFound(t *testing.T) {
	t.Parallel()
	o, err := s3objects.New(s3objects.Config{Client: emulator(t), Bucket: "absent"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = o.ObjectGet(context.Background(), &durable.ObjectGetParams{Key: "o-1/00"})
	if err == nil || errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("ObjectGet on a missing bucket: %v; want an error that is not ErrNotFound (the deployment is wrong, not the object gone)", err)
	}
}

func TestNewRequiresClientAndBucket(t *testing.T) {
	t.Parallel()
	if _, err := s3objects.New(s3objects.Config{Bucket: "b"}); err == nil {
		t.Fatal("New without a client: no error")
	}
	if _, err := s3objects.New(s3objects.Config{Client: emulator(t)}); err == nil {
		t.Fatal("New without a bucket: no error")
	}
}

// A presigned URL reads the object with a plain GET, no credentials.
func TestPresignGetReadsTheObject(t *testing.T) {
	t.Parallel()
	o := newObjects(t, emulator(t), "sagas/")
	body := []byte(`{"doc": "large"}`)
	if err := o.ObjectPut(context.Background(), &durable.ObjectPutParams{Key: "s-1/abc", Body: body}); err != nil {
		t.Fatal(err)
	}
	url, err := o.PresignGet(context.Background(), "s-1/abc", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(url, "X-Amz-Signature=") || !strings.Contains(url, "sagas/s-1/abc") {
		t.Fatalf("url %s: want a signed URL of the prefixed key", url)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(got) != string(body) {
		t.Fatalf("GET %s: %d %q", url, resp.StatusCode, got)
	}
}
