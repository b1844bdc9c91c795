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

func TestConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) durable.Store { return awstest.New(t).Store })
}

func TestItemSizeIsCheckedBeforeWriting(t *testing.T) {
	s := awstest.New(t).Store
	r := durable.SagaRecord{SagaID: "big-1", Version: 1, Status: durable.StatusRunning, Name: "order", DefinitionHash: "h", UpdatedAt: time.Now(), State: make([]byte, dynamo.MaxItemBytes)}
	err := s.SagaCreate(context.Background(), &durable.SagaCreateParams{Record: r})
	if !errors.Is(err, durable.ErrTooLarge) || !strings.Contains(err.Error(), "saga big-1") || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("err = %v, want ErrTooLarge naming the saga and the size", err)
	}
}

// One transition of a small saga costs one consistent read and one write of
// one write unit on the table, as the emulator reports it. DynamoDB also
// bills the by_status index (1 unit for a create, 2 for an update, which
// moves the entry): cost.Saga.IndexWRU counts those, by DynamoDB's rule,
// since no emulator reports them.
func TestWriteUnitsPerTransition(t *testing.T) {
	b := awstest.New(t)
	s, counter := b.Store, b.Counter
	ctx := context.Background()
	st := make([]byte, 300)
	r := durable.SagaRecord{SagaID: "wu-1", Version: 1, Status: durable.StatusRunning, Name: "order", DefinitionHash: strings.Repeat("a", 64), UpdatedAt: time.Now(), State: st}
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	if _, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "wu-1"}); err != nil {
		t.Fatal(err)
	}
	r.Version = 2
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: r, ExpectedVersion: 1}); err != nil {
		t.Fatal(err)
	}
	snap := counter.Snapshot()
	get, put := snap["DynamoDB.GetItem"], snap["DynamoDB.PutItem"]
	if get.Calls != 1 || put.Calls != 1 || len(snap) != 2 {
		t.Fatalf("requests %+v", snap)
	}
	if put.WriteUnits != 1 || get.ReadUnits != 1 {
		t.Fatalf("write units %v, read units %v; want 1 and 1 for a 300-byte state", put.WriteUnits, get.ReadUnits)
	}
	t.Logf("transition of a 300-byte state: %v read unit(s), %v write unit(s)", get.ReadUnits, put.WriteUnits)
}

// A parked saga keeps no ttl attribute, a finished one gets it, and a write
// that moves a saga out of a final status removes it (each write replaces
// the whole item).
func TestTTLOnlyOnSagasOverForGood(t *testing.T) {
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
