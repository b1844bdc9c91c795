package dynamo

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambdasaga/lambdasaga/durable"
)

// Only sagas that are over for good expire. A saga parked in
// compensation_failed waits for an operator: it must never be deleted
// under them, however long they take.
func TestOnlySucceededAndCompensatedSagasExpire(t *testing.T) {
	updated := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := &Store{table: "t", retention: 24 * time.Hour}
	for _, status := range durable.Statuses() {
		it, err := s.item(&durable.SagaRecord{SagaID: "s-1", Version: 2, Status: status, Name: "n", DefinitionHash: "h", UpdatedAt: updated})
		if err != nil {
			t.Fatal(err)
		}
		ttl, has := it[attrTTL].(*types.AttributeValueMemberN)
		want := status == durable.StatusSucceeded || status == durable.StatusCompensated
		if has != want {
			t.Errorf("%s: ttl attribute %v, want %v", status, has, want)
		}
		if has && ttl.Value != strconv.FormatInt(updated.Add(24*time.Hour).Unix(), 10) {
			t.Errorf("%s: ttl %s, want a day after the update", status, ttl.Value)
		}
	}
	keep := &Store{table: "t", retention: -1}
	it, _ := keep.item(&durable.SagaRecord{SagaID: "s-1", Version: 2, Status: durable.StatusSucceeded, UpdatedAt: updated})
	if _, has := it[attrTTL]; has {
		t.Error("negative retention: ttl attribute written")
	}
}
