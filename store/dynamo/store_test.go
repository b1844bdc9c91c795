package dynamo_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
	"github.com/lambdasaga/lambdasaga/store/storetest"
)

// Each case of the suite runs on a table of its own: newStore gets the
// case's t, and marks it parallel before making its table (the suite
// calls newStore once per case, first thing).
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) durable.Store {
		t.Parallel()
		return awstest.New(t).Store
	})
}

func TestItemSizeIsCheckedBeforeWriting(t *testing.T) {
	t.Parallel()
	s := awstest.New(t).Store
	r := durable.SagaRecord{SagaID: "big-1", Version: 1, Status: durable.StatusRunning, Name: "order", DefinitionHash: "h", UpdatedAt: time.Now(), State: make([]byte, dynamo.MaxItemBytes)}
	err := s.SagaCreate(context.Background(), &durable.SagaCreateParams{Record: r})
	if !errors.Is(err, durable.ErrTooLarge) || !strings.Contains(err.Error(), "saga big-1") || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("err = %v, want ErrTooLarge naming the saga and the size", err)
	}
}

// What each write of a small saga bills, as DynamoDB bills it (the
// accounting middleware computes the indexes' share, which the emulator
// leaves out): 1 unit on the table, whatever the write; on by_status 1 for
// a create, 2 for a status change (the entry moves), 0 otherwise; on
// by_due 1 for setting a timer or clearing it, 2 for changing it, 0 for
// none or the same (so a saga that never waits bills nothing there). A
// read is 1 unit.
func TestWriteUnitsPerTransition(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	s, counter := b.Store, b.Counter
	ctx := context.Background()
	t0 := time.Now()
	r := durable.SagaRecord{SagaID: "wu-1", Version: 1, Status: durable.StatusWaiting, Name: "order", DefinitionHash: strings.Repeat("a", 64),
		CreatedAt: t0, StatusSince: t0, UpdatedAt: t0, WakeAt: t0.Add(30 * 24 * time.Hour), State: make([]byte, 300)}
	// next is r's next version at the next second, in status st (since
	// then, if it changes) with its timer at wake.
	next := func(st durable.Status, wake time.Time) error {
		r.Version++
		r.UpdatedAt = t0.Add(time.Duration(r.Version) * time.Second)
		if st != r.Status {
			r.Status, r.StatusSince = st, r.UpdatedAt
		}
		r.WakeAt = wake
		return s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: r, ExpectedVersion: r.Version - 1})
	}
	for _, w := range []struct {
		name               string
		write              func() error
		table, status, due float64
	}{
		{"create, waiting on a timer", func() error { return s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}) }, 1, 1, 1},
		{"a write that keeps the status and the timer", func() error { return next(durable.StatusWaiting, r.WakeAt) }, 1, 0, 0},
		{"the sweep's count", func() error {
			return s.SagaSetResends(ctx, &durable.SagaSetResendsParams{SagaID: "wu-1", Version: 2, From: 0, To: 1})
		}, 1, 0, 0},
		{"the timer changed", func() error { return next(durable.StatusWaiting, t0.Add(time.Hour)) }, 1, 0, 2},
		{"the timer fired: running, no timer", func() error { return next(durable.StatusRunning, time.Time{}) }, 1, 2, 1},
		{"a step that keeps the status, no timer", func() error { return next(durable.StatusRunning, time.Time{}) }, 1, 0, 0},
		{"a timer set, the status kept", func() error { return next(durable.StatusRunning, t0.Add(time.Hour)) }, 1, 0, 1},
		{"the timer cleared, the status kept", func() error { return next(durable.StatusRunning, time.Time{}) }, 1, 0, 1},
		{"a status change, no timer", func() error { return next(durable.StatusSucceeded, time.Time{}) }, 1, 2, 0},
	} {
		counter.Reset()
		if err := w.write(); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		var table, status, due float64
		var calls, unbilled int
		for op, st := range counter.Snapshot() {
			if op == "DynamoDB.PutItem" || op == "DynamoDB.UpdateItem" {
				calls += st.Calls
				unbilled += st.Unbilled
				table += st.BilledWriteUnits - st.BilledIndexWriteUnits
				status += st.BilledIndexes[dynamo.IndexByStatus]
				due += st.BilledIndexes[dynamo.IndexByDue]
			}
		}
		if calls != 1 || unbilled != 0 || table != w.table || status != w.status || due != w.due {
			t.Errorf("%s: %d writes (%d unbilled) billed %v on the table, %v on by_status, %v on by_due; want 1 write, %v, %v and %v",
				w.name, calls, unbilled, table, status, due, w.table, w.status, w.due)
		}
	}
	counter.Reset()
	if _, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "wu-1"}); err != nil {
		t.Fatal(err)
	}
	if get := counter.Snapshot()["DynamoDB.GetItem"]; get.Calls != 1 || get.ReadUnits != 1 || get.BilledReadUnits != 1 {
		t.Fatalf("read %+v; want 1 call, 1 read unit reported and billed", get)
	}
}

// A parked saga keeps no ttl attribute, a finished one gets it, and a write
// that moves a saga out of a final status removes it (each write replaces
// the whole item).
func TestTTLOnlyOnSagasOverForGood(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	ctx := context.Background()
	hasTTL := func(id string) bool {
		t.Helper()
		out, err := b.DynamoDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &b.Table, ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "SAGA#" + id}, "sk": &types.AttributeValueMemberS{Value: "STATE"},
		}})
		if err != nil || out.Item == nil {
			t.Fatalf("get %s: %v", id, err)
		}
		_, ok := out.Item[dynamo.TTLAttribute]
		return ok
	}
	r := durable.SagaRecord{SagaID: "ttl-1", Version: 1, Status: durable.StatusRunning, Name: "order", DefinitionHash: "h", UpdatedAt: time.Now(), State: []byte{1}}
	if err := b.Store.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		status durable.Status
		ttl    bool
	}{
		{durable.StatusCompensating, false},
		{durable.StatusCompensationFailed, false}, // parked: waits for an operator
		{durable.StatusCompensating, false},       // resumed
		{durable.StatusCompensated, true},
		{durable.StatusRunning, false}, // out of a final status: the ttl goes
		{durable.StatusSucceeded, true},
	} {
		r.Version++
		r.Status = step.status
		if err := b.Store.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: r, ExpectedVersion: r.Version - 1}); err != nil {
			t.Fatal(err)
		}
		if got := hasTTL("ttl-1"); got != step.ttl {
			t.Errorf("v%d %s: ttl attribute %v, want %v", r.Version, step.status, got, step.ttl)
		}
	}
}
