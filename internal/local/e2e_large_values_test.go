package local_test

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/accounting"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/chaos"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/local"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// largeSaga makes a 5 MiB output from a 1 MiB input, reads it in a
// later step, then fails for good: the first step is undone with both
// values. Every action records what it received (chaos.Ledger).
var largeSaga = []byte(`saga: large
input: {doc: string}
steps:
  - id: make
    action: ledger.do
    with: {size: 5242880, check: "${input.doc}"}
    out: made
    compensate:
      action: ledger.undo
      with: {check: "${[input.doc, vars.made]}"}
  - id: read
    action: ledger.do
    with: {check: "${vars.made.blob}"}
  - id: refuse
    action: ledger.do
    with: {fail: true}
`)

const (
	largeInputBytes  = 1 << 20
	largeOutputBytes = 5 << 20
)

// TestE2ELargeValues runs a saga with a 1 MiB input and a 5 MiB action
// output through the real Lambda binaries under aws-lambda-rie, on
// dynalite and fauxqs, with S3 served by gofakes3 in this process
// (awstest.NewS3: the functions get AWS_ENDPOINT_URL_S3 and
// LAMBDASAGA_BUCKET, and their calls are recorded for the IAM check). Its
// last step fails for good, and the compensation, run by the compensate
// function (a process that never held the values), receives both whole.
// The saga's item holds references only, each to an object in the
// bucket.
//
// The functions are the kill test's (internal/chaos/fn), whose ledger
// records a fingerprint of what each action received.
func TestE2ELargeValues(t *testing.T) {
	if os.Getenv("LAMBDASAGA_E2E") == "" {
		t.Skip("LAMBDASAGA_E2E is not set: run make e2e")
	}
	t.Parallel() // beside TestE2E, on tables, queues and a bucket of its own
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sq := awslocal.Endpoint(t, awslocal.EnvSQS)
	dir := t.TempDir()
	rie := filepath.Join(dir, "aws-lambda-rie")
	if err := local.BuildRIE(context.Background(), rie); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	// Building the functions takes minutes on a cold build cache; the
	// test's deadline starts once they run.
	setup := t.Context()
	ledger := &chaos.Ledger{Client: awslocal.DynamoDB(dyn), Table: "e2elarge-ledger"}
	if err := ledger.CreateTable(setup); err != nil {
		t.Fatal(err)
	}
	// Named as the template's bucket (ValuesBucket), so that the IAM
	// check places the calls on it.
	s3 := awstest.NewS3(t, "e2elarge-valuesbucket")
	fn := "../chaos/fn"
	env, err := local.Up(setup, local.Config{
		Template: "../../infra/template.yaml", DynamoDBEndpoint: dyn, SQSEndpoint: sq, RIE: rie, BuildDir: dir,
		Mains:   map[string]string{"AdvanceFunction": fn, "CompensateFunction": fn},
		Workers: 1, Visibility: 2 * time.Second, Prefix: "e2elarge-", Log: logs,
		Env: map[string]string{chaos.EnvLedgerTable: ledger.Table, "AWS_ENDPOINT_URL_S3": s3.Endpoint, "LAMBDASAGA_BUCKET": s3.Bucket},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Down()
	ctx, cancel := context.WithTimeout(setup, 2*time.Minute)
	defer cancel()
	defer func() {
		if t.Failed() {
			t.Logf("function logs:\n%s", logs.String())
		}
	}()
	// The client puts the input's object itself, and reads the values
	// back, as a service given the stack's bucket does.
	c, err := client.NewAWS(client.AWSConfig{AWS: awslocal.ConfigAs(awslocal.ClientPrincipal), Table: env.Table, AdvanceQueueURL: env.QueueURLs["AdvanceQueue"],
		CompensateQueueURL: env.QueueURLs["CompensateQueue"], DynamoDBEndpoint: dyn, SQSEndpoint: sq, Bucket: s3.Bucket, S3Endpoint: s3.Endpoint})
	if err != nil {
		t.Fatal(err)
	}
	const id = "e2e-large"
	doc := strings.Repeat("1 MiB of input ", largeInputBytes/15+1)[:largeInputBytes]
	began := time.Now()
	if _, err := c.Start(ctx, client.StartParams{File: "large.yaml", Definition: largeSaga, SagaID: id, Input: map[string]any{"doc": doc}}); err != nil {
		t.Fatal(err)
	}
	st := waitFinal(t, ctx, c, id)
	t.Logf("%s ended %s in %s", id, st.Status, time.Since(began).Round(time.Millisecond))
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Step != "refuse" {
		t.Fatalf("%s: %s (%+v), want compensated after refuse failed", id, st.Status, st.Failure)
	}
	made := map[string]any{"blob": chaos.LargeOutput(id, "make", largeOutputBytes)}
	if st.Input["doc"] != doc || st.Vars["made"] == nil || st.Vars["made"].(map[string]any)["blob"] != made["blob"] {
		t.Error("the client's status does not show the input and the output as values")
	}

	// What each action received, in the order the ledger applied them.
	entries, err := ledger.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	es := entries[id]
	slices.SortFunc(es, func(a, b chaos.Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	var got []string
	for _, e := range es {
		got = append(got, e.Phase+" "+e.Step+": "+e.Note)
	}
	want := []string{
		"do make: " + chaos.Fingerprint(doc),
		"do read: " + chaos.Fingerprint(made["blob"]),
		"undo make: " + chaos.Fingerprint([]any{doc, made}),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the actions received:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The item: references in place of the values, each to an object in
	// the bucket, and far under DynamoDB's item limit.
	store, err := dynamo.New(dynamo.Config{Client: awslocal.DynamoDB(dyn), Table: env.Table})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.SagaGet(ctx, &durable.SagaGetParams{SagaID: id})
	if err != nil {
		t.Fatal(err)
	}
	item, err := awslocal.DynamoDB(dyn).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(env.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "SAGA#" + id}, "sk": &types.AttributeValueMemberS{Value: "STATE"}}})
	if err != nil || item.Item == nil {
		t.Fatalf("the saga's item: %v, %v", item, err)
	}
	size := accounting.ItemSize(item.Item)
	t.Logf("%s: state %d bytes, item %d bytes", id, len(rec.State), size)
	if size > 8<<10 {
		t.Errorf("the saga's item is %d bytes: the values are not kept apart (DynamoDB's limit is 400 KB)", size)
	}
	var raw saga.State
	if refs, err := raw.UnmarshalBinaryRefs(rec.State); err != nil || !refs {
		t.Fatalf("the stored state holds no reference (%v)", err)
	}
	for _, v := range []struct {
		name string
		v    any
		min  int
	}{{"input doc", raw.Input["doc"], largeInputBytes}, {"vars made", raw.Vars["made"], largeOutputBytes}} {
		if r, ok := v.v.(saga.Ref); !ok || r.Size < v.min || r.Size > v.min+64 {
			t.Errorf("stored %s: %v, want a reference to about %d bytes", v.name, v.v, v.min)
		}
	}
	var refs []string
	err = raw.Hydrate(func(r saga.Ref) (any, error) {
		refs = append(refs, r.Key(id))
		ok, err := s3.Has(r.Key(id))
		if err == nil && !ok {
			t.Errorf("the stored state refers to %s (%d bytes), which the bucket does not hold", r.Key(id), r.Size)
		}
		return r, err
	})
	if err != nil {
		t.Fatal(err)
	}
	keys, sizes, err := s3.Keys(id + "/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		t.Logf("object %s: %d bytes", k, sizes[k])
	}
	if len(refs) < 2 || len(keys) < 2 {
		t.Errorf("%d references in the state, %d objects in the bucket; want the input's and the output's at least", len(refs), len(keys))
	}
}
