package accounting

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// forkRecord50 is a fork record of 50 lanes as store/dynamo keeps it
// (docs/PROTOCOL.md, "The fork record: lanes"), in DynamoDB's JSON: each
// lane counted 3 times, lanes 0 and 7 stopped, child 7 failed.
func forkRecord50() string {
	it := map[string]any{"pk": map[string]string{"S": "FORK#order-7#ship_all#4"}, "sk": map[string]string{"S": "FORK"},
		"stop": map[string][]string{"NS": {"0", "7"}}, "fail": map[string]string{"N": "7"}}
	for j := range 50 {
		it["l"+strconv.Itoa(j)] = map[string]string{"N": "3"}
	}
	b, _ := json.Marshal(it)
	return string(b)
}

// A fork's count, as store/dynamo sends it (SET of the lane, if_not_exists
// of the failed child, ADD to the stopped set, ALL_OLD asked for), of a
// record of 50 lanes bills exactly 1 write unit on the table and nothing on
// the indexes: the record is under 1 KB before and after, and has no index
// keys (Developer Guide, "DynamoDB read and write operations": 1 unit per
// KB of the larger of the item before and after; "Global secondary
// indexes": an item without the index's keys has no entry). The same
// update asking for ALL_NEW cannot be billed (the item before is not
// answered): counted unbilled, not guessed.
func TestForkCountBillsOneWriteUnit(t *testing.T) {
	old := forkRecord50()
	fake := &fakeDynamoDB{requests: map[string]map[string]any{}, answers: map[string]string{"UpdateItem": `{"Attributes":` + old + `}`}}
	c := New()
	schema := byStatus(types.ProjectionTypeInclude, "st", "name", "def", "crt")
	schema.Indexes = append(schema.Indexes, IndexSchema{Name: "by_due", Key: []string{"gsi2pk", "gsi2sk"}, Projection: types.ProjectionTypeKeysOnly})
	c.Table("t", *schema)
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", HTTPClient: fake, BaseEndpoint: aws.String("http://fake"),
		Credentials: aws.AnonymousCredentials{}, APIOptions: []func(*middleware.Stack) error{c.Register}, RetryMaxAttempts: 1})
	upd := &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: item{"pk": s("FORK#order-7#ship_all#4"), "sk": s("FORK")},
		UpdateExpression:         aws.String("SET #l = :next, #f = if_not_exists(#f, :child) ADD #s :lane"),
		ConditionExpression:      aws.String("#l = :m"),
		ExpressionAttributeNames: map[string]string{"#l": "l12", "#f": "fail", "#s": "stop"},
		ExpressionAttributeValues: item{":next": num("4"), ":m": num("3"), ":child": num("162"),
			":lane": &types.AttributeValueMemberNS{Value: []string{"12"}}},
		ReturnValues: types.ReturnValueAllOld,
	}
	out, err := db.UpdateItem(context.Background(), upd)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Attributes) != 54 {
		t.Fatalf("the caller asked for ALL_OLD and got %d attributes, want the record's 54", len(out.Attributes))
	}
	expect(t, c, "DynamoDB.UpdateItem", Stat{Calls: 1, BilledWriteUnits: 1})

	// What the update leaves: the lane counted, the first failed child
	// kept, the lane stopped, and nothing in either index.
	before := map[string]types.AttributeValue(out.Attributes)
	after, err := ApplyUpdate(before, upd.Key, *upd.UpdateExpression, upd.ExpressionAttributeNames, upd.ExpressionAttributeValues)
	if err != nil {
		t.Fatal(err)
	}
	if !EqualValues(after["l12"], num("4")) || !EqualValues(after["fail"], num("7")) ||
		!EqualValues(after["stop"], &types.AttributeValueMemberNS{Value: []string{"0", "7", "12"}}) {
		t.Fatalf("after the count: l12 %v, fail %v, stop %v", after["l12"], after["fail"], after["stop"])
	}
	if size := ItemSize(after); size >= 1024 {
		t.Fatalf("a record of 50 lanes is %d bytes", size)
	}
	if b := schema.WriteBill(before, after); b.WriteUnits != 1 || b.IndexUnits() != 0 {
		t.Fatalf("bill %+v", b)
	}

	upd.ReturnValues = types.ReturnValueAllNew
	if _, err := db.UpdateItem(context.Background(), upd); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "DynamoDB.UpdateItem", Stat{Calls: 2, BilledWriteUnits: 1, Unbilled: 1})
}
