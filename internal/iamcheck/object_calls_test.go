package iamcheck_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/iamcheck"
	"github.com/lambdasaga/lambdasaga/internal/samtemplate"
)

// The functions' calls on the values bucket (large values by reference)
// are placed on the template's ValuesBucket and evaluated: an object put
// and read is granted to every function, a listing and a tag to the
// advance function alone, a delete to none; a call on a
// bucket the template does not have is reported, never skipped.
func TestObjectCallsAreCheckedOnTheBucket(t *testing.T) {
	t.Parallel()
	dir := engine(t)
	f := filepath.Join(t.TempDir(), "calls.jsonl")
	if err := os.WriteFile(f, []byte(
		`{"call":{"principal":"AdvanceFunction","operation":"PutObject","action":"s3:PutObject","bucket":"e2e-valuesbucket","object":"saga-1/ab"}}
{"call":{"principal":"CompensateFunction","operation":"GetObject","action":"s3:GetObject","bucket":"e2e-valuesbucket","object":"saga-1/ab"}}
{"call":{"principal":"SweepFunction","operation":"GetObject","action":"s3:GetObject","bucket":"e2e-valuesbucket","object":"saga-1/ab"}}
{"call":{"principal":"AdvanceFunction","operation":"DeleteObject","action":"s3:DeleteObject","bucket":"e2e-valuesbucket","object":"saga-1/ab"}}
{"call":{"principal":"AdvanceFunction","operation":"ListObjectsV2","action":"s3:ListBucket","bucket":"e2e-valuesbucket"}}
{"call":{"principal":"AdvanceFunction","operation":"CopyObject","action":"s3:PutObjectTagging","bucket":"e2e-valuesbucket","object":"saga-1/ab"}}
{"call":{"principal":"CompensateFunction","operation":"ListObjectsV2","action":"s3:ListBucket","bucket":"e2e-valuesbucket"}}
{"call":{"principal":"CompensateFunction","operation":"CopyObject","action":"s3:PutObjectTagging","bucket":"e2e-valuesbucket","object":"saga-1/ab"}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err := iamcheck.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	denials, cases, _ := check(t, dir, "../../infra/template.yaml", rec)
	var denied []string
	for _, d := range denials {
		denied = append(denied, strings.SplitN(d, " is ", 2)[0])
	}
	// The advance function lists a saga's objects and tags them (an
	// expire marks a finished tree's objects ended); no other function
	// does.
	want := []string{
		"AdvanceFunction: DeleteObject (s3:DeleteObject) on object e2e-valuesbucket/saga-1/ab",
		"CompensateFunction: CopyObject (s3:PutObjectTagging) on object e2e-valuesbucket/saga-1/ab",
		"CompensateFunction: ListObjectsV2 (s3:ListBucket) on bucket e2e-valuesbucket",
	}
	slices.Sort(denied)
	if len(cases) != 8 || !slices.Equal(denied, want) {
		t.Errorf("%d cases, denied:\ngot  %q\nwant %q", len(cases), denied, want)
	}
	for _, c := range cases {
		if !strings.HasPrefix(c.Resource, "arn:aws:s3:::valuesbucket") {
			t.Errorf("%s placed on %s, want the template's ValuesBucket", c.Call, c.Resource)
		}
	}

	other := filepath.Join(t.TempDir(), "other.jsonl")
	if err := os.WriteFile(other, []byte(`{"call":{"principal":"AdvanceFunction","operation":"GetObject","action":"s3:GetObject","bucket":"elsewhere","object":"k"}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, err = iamcheck.Read(other)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := samtemplate.Load("../../infra/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cases, _, unplaced, err := iamcheck.Cases(tpl, rec); err != nil || len(cases) != 0 || len(unplaced) != 1 {
		t.Errorf("a call on a bucket the template lacks: %d cases, unplaced %q, %v; want it reported", len(cases), unplaced, err)
	}
}
