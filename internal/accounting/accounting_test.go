package accounting

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestRecordAttributesCapacityByOperation(t *testing.T) {
	c := New()
	c.record("DynamoDB.GetItem", &dynamodb.GetItemOutput{ConsumedCapacity: &types.ConsumedCapacity{CapacityUnits: aws.Float64(1)}}, nil, nil, false)
	c.record("DynamoDB.PutItem", &dynamodb.PutItemOutput{ConsumedCapacity: &types.ConsumedCapacity{CapacityUnits: aws.Float64(3)}}, nil, nil, false)
	c.record("DynamoDB.PutItem", &dynamodb.PutItemOutput{}, errors.New("conditional check failed"), nil, false)
	c.record("SQS.SendMessage", nil, nil, nil, false)
	s := c.Snapshot()
	if g := s["DynamoDB.GetItem"]; g.Calls != 1 || g.ReadUnits != 1 || g.WriteUnits != 0 {
		t.Fatalf("get %+v", g)
	}
	if p := s["DynamoDB.PutItem"]; p.Calls != 2 || p.Errors != 1 || p.WriteUnits != 3 || p.ReadUnits != 0 {
		t.Fatalf("put %+v", p)
	}
	if s["SQS.SendMessage"].Calls != 1 || len(c.Operations()) != 3 {
		t.Fatalf("%+v", s)
	}
	c.Reset()
	if len(c.Snapshot()) != 0 {
		t.Fatal("reset kept counts")
	}
}
