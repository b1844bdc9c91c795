package awstest

import (
	"errors"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/lambdasaga/lambdasaga/internal/awscall"
)

// S3 is an S3 emulator in the test's process (gofakes3 on memory) with
// one bucket, served on a 127.0.0.1 port, so that the real functions,
// processes of their own, reach it at Endpoint (AWS_ENDPOINT_URL_S3 in
// their environment: the SDK addresses buckets by path on an IP
// endpoint). Where the run records AWS calls (awscall.EnvFile, make e2e),
// every request a principal signs is recorded for the IAM check, as the
// proxies in front of the other emulators record theirs.
type S3 struct {
	Endpoint string
	Bucket   string
	backend  gofakes3.Backend
}

// NewS3 serves the emulator with bucket created, until the test ends.
func NewS3(t testing.TB, bucket string) *S3 {
	t.Helper()
	rec, err := awscall.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close() })
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	h := gofakes3.New(backend).Server()
	if rec != nil {
		h = rec.Handler(awscall.S3, h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &S3{Endpoint: srv.URL, Bucket: bucket, backend: backend}
}

// Has reports whether the bucket holds an object under key.
func (s *S3) Has(key string) (bool, error) {
	_, err := s.backend.HeadObject(s.Bucket, key)
	if gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey) {
		return false, nil
	}
	return err == nil, err
}

// Keys lists the keys of the bucket's objects that start with prefix,
// in order, and their sizes.
func (s *S3) Keys(prefix string) (keys []string, sizes map[string]int64, err error) {
	p := gofakes3.NewPrefix(&prefix, nil)
	list, err := s.backend.ListBucket(s.Bucket, &p, gofakes3.ListBucketPage{})
	if err != nil {
		return nil, nil, err
	}
	if list.IsTruncated {
		return nil, nil, errors.New("s3 emulator: the listing is truncated")
	}
	sizes = map[string]int64{}
	for _, c := range list.Contents {
		keys = append(keys, c.Key)
		sizes[c.Key] = c.Size
	}
	slices.Sort(keys)
	return keys, sizes, nil
}
