package s3objects_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/objects/s3objects"
)

// request is what the emulator was asked, as S3 would see it.
type request struct {
	method, path string
	query        url.Values
	header       http.Header
}

// recordingEmulator is emulator, with every request it serves kept.
func recordingEmulator(t *testing.T) (*s3.Client, func() []request) {
	t.Helper()
	var (
		mu   sync.Mutex
		reqs []request
	)
	h := gofakes3.New(s3mem.New()).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, request{r.Method, r.URL.Path, r.URL.Query(), r.Header.Clone()})
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return awslocal.S3(srv.URL), func() []request {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(reqs)
	}
}

func putN(t *testing.T, o *s3objects.Objects, id string, n int) []string {
	t.Helper()
	var keys []string
	for i := range n {
		b := []byte(fmt.Sprintf("value %d of %s", i, id))
		k := durable.ObjectKey(id, sha256.Sum256(b))
		if err := o.ObjectPut(context.Background(), &durable.ObjectPutParams{Key: k, Body: b}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

// ObjectsEnd lists the saga's prefix page by page and copies each object
// onto itself with the ended tag, replacing its tags and metadata; the
// objects of other sagas (a child's id starts with its parent's) are
// left alone, and the bodies are unchanged.
func TestObjectsEndTagsEveryObjectOfTheSaga(t *testing.T) {
	t.Parallel()
	client, requests := recordingEmulator(t)
	o := newObjects(t, client, "sagas/")
	o.SetListPage(2)
	mine := putN(t, o, "o-1", 5)
	others := append(putN(t, o, "o-1.pay.1.0", 2), putN(t, o, "o-10", 1)...)
	before := len(requests())
	if err := o.ObjectsEnd(context.Background(), &durable.ObjectsEndParams{SagaID: "o-1"}); err != nil {
		t.Fatal(err)
	}
	var lists, copies []string
	for _, r := range requests()[before:] {
		switch {
		case r.method == http.MethodGet && r.query.Get("list-type") == "2":
			if p := r.query.Get("prefix"); p != "sagas/o-1/" {
				t.Errorf("LIST with prefix %q, want sagas/o-1/", p)
			}
			lists = append(lists, r.query.Get("continuation-token"))
		case r.method == http.MethodPut && r.header.Get("X-Amz-Copy-Source") != "":
			if got := r.header.Get("X-Amz-Tagging-Directive"); got != "REPLACE" {
				t.Errorf("COPY %s: tagging directive %q, want REPLACE", r.path, got)
			}
			if got := r.header.Get("X-Amz-Tagging"); got != s3objects.EndedTag+"="+s3objects.EndedValue {
				t.Errorf("COPY %s: tagging %q", r.path, got)
			}
			if got := r.header.Get("X-Amz-Metadata-Directive"); got != "REPLACE" {
				t.Errorf("COPY %s: metadata directive %q, want REPLACE (a copy onto itself must change something)", r.path, got)
			}
			src, _ := url.PathUnescape(r.header.Get("X-Amz-Copy-Source"))
			if !strings.HasSuffix(r.path, strings.TrimPrefix(src, "/")) {
				t.Errorf("COPY %s from %s: not onto itself", r.path, src)
			}
			copies = append(copies, strings.TrimPrefix(r.path[strings.Index(r.path[1:], "/")+2:], "sagas/"))
		default:
			t.Errorf("unexpected request %s %s %v", r.method, r.path, r.query)
		}
	}
	if len(lists) != 3 || lists[0] != "" {
		t.Errorf("LISTs with continuation tokens %q: want 3 pages of 2, the first without", lists)
	}
	slices.Sort(copies)
	if want := slices.Sorted(slices.Values(mine)); !slices.Equal(copies, want) {
		t.Errorf("copied %v, want the saga's own %v", copies, want)
	}
	for _, k := range mine {
		head, err := client.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: o.Bucket(), Key: aws.String("sagas/" + k)})
		if err != nil {
			t.Fatal(err)
		}
		if head.Metadata[s3objects.EndedTag] != s3objects.EndedValue {
			t.Errorf("%s: metadata %v after ObjectsEnd", k, head.Metadata)
		}
	}
	for _, k := range others {
		head, err := client.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: o.Bucket(), Key: aws.String("sagas/" + k)})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := head.Metadata[s3objects.EndedTag]; ok {
			t.Errorf("%s, another saga's: marked", k)
		}
	}
}
