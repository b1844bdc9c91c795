package awstest

import (
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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
	mu       sync.Mutex
	puts     map[string]int // PutObject requests by key, answered or not
	stored   func(principal, key string)
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
	s := &S3{Bucket: bucket, backend: backend, puts: map[string]int{}}
	fake := gofakes3.New(backend).Server()
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, key, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); ok && key != "" && r.Method == http.MethodPut {
			s.mu.Lock()
			s.puts[key]++
			stored := s.stored
			s.mu.Unlock()
			if stored != nil {
				b := &beforeAnswer{ResponseWriter: w, hook: func() { stored(principal(r), key) }}
				fake.ServeHTTP(b, r)
				b.answered(http.StatusOK) // gofakes3 answers a put it stored with nothing written
				return
			}
		}
		fake.ServeHTTP(w, r)
	})
	if rec != nil {
		h = rec.Handler(awscall.S3, h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.Endpoint = srv.URL
	return s
}

// OnStored has fn called with the principal and the key of each object
// put, once it is stored and before the put is answered: a test can kill
// the process that put it there, between its put and the write that
// would refer to it.
func (s *S3) OnStored(fn func(principal, key string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stored = fn
}

// beforeAnswer calls hook before an answer of success, which gofakes3
// gives once the object is stored.
type beforeAnswer struct {
	http.ResponseWriter
	hook func()
	done bool
}

// answered notes the answer's status, calling hook first on a success.
func (b *beforeAnswer) answered(code int) {
	if b.done {
		return
	}
	b.done = true
	if code == http.StatusOK {
		b.hook()
	}
}

func (b *beforeAnswer) WriteHeader(code int) {
	b.answered(code)
	b.ResponseWriter.WriteHeader(code)
}

func (b *beforeAnswer) Write(p []byte) (int, error) {
	b.answered(http.StatusOK)
	return b.ResponseWriter.Write(p)
}

// principal is the access key id a signed request names.
func principal(r *http.Request) string {
	_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	key, _, _ := strings.Cut(cred, "/")
	return key
}

// Puts returns how many PutObject requests came for each key, whether
// they were stored or cut off: a key put more than once was put again
// by a process that did not know it stored (a worker killed between the
// put and the write that refers to it, a write that lost a race).
func (s *S3) Puts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.puts)
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
