package sagactl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

// docDefinition passes its document through two simulated actions (their
// output is their input) and succeeds with the last one's.
const docDefinition = `saga: docs
input: {doc: string}
steps:
  - {id: parse, action: docs.parse, with: {doc: "${input.doc}"}, out: parsed}
  - {id: store, action: docs.store, with: {doc: "${vars.parsed.doc}"}, out: stored}
  - id: done
    succeed: {output: "${{'size': size(vars.stored.doc)}}"}
`

// largeInputFiles writes docDefinition and a 1 MiB input.
func largeInputFiles(t *testing.T) (def, input string) {
	t.Helper()
	dir := t.TempDir()
	def, input = filepath.Join(dir, "docs.yaml"), filepath.Join(dir, "doc.json")
	body, err := json.Marshal(map[string]any{"doc": strings.Repeat("d", 1<<20)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(def, []byte(docDefinition), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(input, body, 0o644); err != nil {
		t.Fatal(err)
	}
	return def, input
}

// run takes a 1 MiB input from a file and passes it through its steps,
// its values kept as objects: in memory by default, on an S3 emulator
// with --s3-endpoint.
func TestRunTakesALargeInput(t *testing.T) {
	t.Parallel()
	def, input := largeInputFiles(t)
	emu := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(emu.Close)
	for name, extra := range map[string][]string{
		"memory":      nil,
		"s3-endpoint": {"--s3-endpoint", emu.URL, "--bucket", "docs"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"run", def, "--input", "@" + input, "--json"}, extra...)
			r := runSagactl(t, nil, args...)
			if r.code != sagactl.ExitOK {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			var rep report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("%v\n%s", err, r.stdout)
			}
			var out bytes.Buffer
			_ = json.Compact(&out, rep.Output)
			if rep.Status != "succeeded" || out.String() != `{"size":1048576}` {
				t.Fatalf("status %s, output %s; want succeeded with the document's size", rep.Status, rep.Output)
			}
			if extra == nil {
				return
			}
			// The input, and the map each action returned (the same
			// content twice: one object).
			list, err := awslocal.S3(emu.URL).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("docs")})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Contents) != 2 {
				t.Fatalf("%d objects in the bucket, want 2", len(list.Contents))
			}
		})
	}
}

// start, like run, takes a 1 MiB input when the sagas' values go by
// reference (--bucket, or --s3-endpoint on the emulators), and work runs
// the saga it started on the emulators.
func TestStartTakesALargeInputWithABucket(t *testing.T) {
	t.Parallel()
	where := workWhere(t)
	def, input := largeInputFiles(t)
	emu := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(emu.Close)
	s3flags := []string{"--s3-endpoint", emu.URL, "--bucket", "docs"}
	// run makes the table and queues (and the bucket).
	if r := runSagactl(t, nil, append(append([]string{"run", def, "--input", `{"doc": "small"}`, "--id", "d-0"}, where...), s3flags...)...); r.code != sagactl.ExitOK {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Without the bucket, the old limit holds.
	if r := runSagactl(t, nil, append([]string{"start", def, "--input", "@" + input, "--id", "d-1"}, where...)...); r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "over the limit") {
		t.Fatalf("start without a bucket: exit %d\n%s", r.code, r.stderr)
	}
	if r := runSagactl(t, nil, append(append([]string{"start", def, "--input", "@" + input, "--id", "d-1"}, where...), s3flags...)...); r.code != sagactl.ExitOK {
		t.Fatalf("start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runSagactl(t, nil, append(append([]string{"work", "--for", "4s"}, where...), s3flags...)...); r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "d-1 succeeded") {
		t.Fatalf("work: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
