package accounting

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// fakeDynamoDB answers each operation with a canned JSON body and keeps
// the requests it got.
type fakeDynamoDB struct {
	answers  map[string]string // operation -> body; a body with __type is a 400
	requests map[string]map[string]any
}

func (f *fakeDynamoDB) Do(r *http.Request) (*http.Response, error) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(body, &req)
	f.requests[op] = req
	answer, status := f.answers[op], http.StatusOK
	if strings.Contains(answer, "__type") {
		status = http.StatusBadRequest
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(strings.NewReader(answer)), Request: r}, nil
}

const (
	oldSaga = `{"pk":{"S":"SAGA#1"},"sk":{"S":"STATE"},"st":{"S":"running"},"v":{"N":"1"},"gsi1pk":{"S":"STATUS#running"},"gsi1sk":{"S":"100#1"}}`
	ccf     = `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"`
)

// TestMiddlewareBillsWhatTheCallerDidNotAskToSee drives the middleware
// through the SDK against canned answers: it asks for the item before
// each write, bills from it, and hands the caller what it asked for.
func TestMiddlewareBillsWhatTheCallerDidNotAskToSee(t *testing.T) {
	fake := &fakeDynamoDB{requests: map[string]map[string]any{}, answers: map[string]string{
		"PutItem":    `{"Attributes":` + oldSaga + `}`,
		"UpdateItem": `{"Attributes":` + oldSaga + `}`,
		"GetItem":    `{"Item":` + oldSaga + `}`,
		"Query":      `{"Items":[],"Count":0,"ScannedCount":0}`,
	}}
	c := New()
	c.Table("t", *byStatus(types.ProjectionTypeInclude, "st", "v"))
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", HTTPClient: fake, BaseEndpoint: aws.String("http://fake"),
		Credentials: aws.AnonymousCredentials{}, APIOptions: []func(*middleware.Stack) error{c.Register}, RetryMaxAttempts: 1})
	ctx := context.Background()
	newSaga := item{"pk": s("SAGA#1"), "sk": s("STATE"), "st": s("running"), "v": num("2"), "gsi1pk": s("STATUS#running"), "gsi1sk": s("200#1")}

	// PutItem moving the index entry: 1 on the table, 2 on the index.
	put := &dynamodb.PutItemInput{TableName: aws.String("t"), Item: newSaga}
	out, err := db.PutItem(ctx, put)
	if err != nil {
		t.Fatal(err)
	}
	if fake.requests["PutItem"]["ReturnValues"] != "ALL_OLD" || fake.requests["PutItem"]["ReturnValuesOnConditionCheckFailure"] != "ALL_OLD" {
		t.Fatalf("sent %v: want both return values ALL_OLD", fake.requests["PutItem"])
	}
	if out.Attributes != nil || put.ReturnValues != "" || put.ReturnValuesOnConditionCheckFailure != "" {
		t.Fatalf("the caller sees what it did not ask for: %v, %+v", out.Attributes, put)
	}
	expect(t, c, "DynamoDB.PutItem", Stat{Calls: 1, BilledWriteUnits: 3, BilledIndexWriteUnits: 2, BilledIndexes: map[string]float64{"by_status": 2}})

	// UpdateItem changing a projected attribute: 1 + 1.
	upd := &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: item{"pk": s("SAGA#1"), "sk": s("STATE")},
		UpdateExpression: aws.String("SET #v = #v + :one"), ExpressionAttributeNames: map[string]string{"#v": "v"},
		ExpressionAttributeValues: item{":one": num("1")}}
	if out, err := db.UpdateItem(ctx, upd); err != nil || out.Attributes != nil {
		t.Fatalf("%v %v", out, err)
	}
	expect(t, c, "DynamoDB.UpdateItem", Stat{Calls: 1, BilledWriteUnits: 2, BilledIndexWriteUnits: 1, BilledIndexes: map[string]float64{"by_status": 1}})

	// The caller's own ReturnValues other than ALL_OLD: sent as asked,
	// answered as asked, unbilled.
	upd.ReturnValues = types.ReturnValueUpdatedNew
	if out, err := db.UpdateItem(ctx, upd); err != nil || out.Attributes == nil {
		t.Fatalf("%v %v", out, err)
	}
	if fake.requests["UpdateItem"]["ReturnValues"] != "UPDATED_NEW" {
		t.Fatalf("sent %v", fake.requests["UpdateItem"])
	}
	// An update expression ApplyUpdate does not support: unbilled.
	upd.ReturnValues = ""
	upd.UpdateExpression = aws.String("SET #v = list_append(#v, :one)")
	if _, err := db.UpdateItem(ctx, upd); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "DynamoDB.UpdateItem", Stat{Calls: 3, BilledWriteUnits: 2, BilledIndexWriteUnits: 1, BilledIndexes: map[string]float64{"by_status": 1}, Unbilled: 2})

	// A failed condition bills the existing item on the table only, and
	// the caller's error holds no item it did not ask for.
	fake.answers["PutItem"] = ccf + `,"Item":` + oldSaga + `}`
	_, err = db.PutItem(ctx, put)
	var cf *types.ConditionalCheckFailedException
	if !errors.As(err, &cf) || cf.Item != nil {
		t.Fatalf("%v: want a condition failure without the item", err)
	}
	// Without the item, asked for: there was none, and the write bills
	// the minimum, 1.
	fake.answers["PutItem"] = ccf + `}`
	if _, err = db.PutItem(ctx, put); !errors.As(err, &cf) {
		t.Fatal(err)
	}
	expect(t, c, "DynamoDB.PutItem", Stat{Calls: 3, Errors: 2, BilledWriteUnits: 5, BilledIndexWriteUnits: 2, BilledIndexes: map[string]float64{"by_status": 2}})

	// A table the counter has not seen: unbilled.
	fake.answers["PutItem"] = `{}`
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("other"), Item: newSaga}); err != nil {
		t.Fatal(err)
	}
	if st := c.Snapshot()["DynamoDB.PutItem"]; st.Unbilled != 1 {
		t.Fatalf("%+v: want the unknown table's write unbilled", st)
	}

	// Reads: a consistent GetItem of a small item, one of a few
	// attributes (unbilled), an empty eventually consistent Query.
	if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: newSaga, ConsistentRead: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: newSaga, ProjectionExpression: aws.String("st")}); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "DynamoDB.GetItem", Stat{Calls: 2, BilledReadUnits: 1, Unbilled: 1})
	if _, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("t"), IndexName: aws.String("by_status")}); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "DynamoDB.Query", Stat{Calls: 1, BilledReadUnits: 0.5})
}

// TestCounterLearnsTablesFromCreateTable: the schema of a table created
// through the counted client needs no Table call.
func TestCounterLearnsTablesFromCreateTable(t *testing.T) {
	fake := &fakeDynamoDB{requests: map[string]map[string]any{}, answers: map[string]string{
		"CreateTable": `{"TableDescription":{"TableName":"t"}}`,
		"PutItem":     `{}`,
	}}
	c := New()
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", HTTPClient: fake, BaseEndpoint: aws.String("http://fake"),
		Credentials: aws.AnonymousCredentials{}, APIOptions: []func(*middleware.Stack) error{c.Register}, RetryMaxAttempts: 1})
	ctx := context.Background()
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("t"),
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("g"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item{"pk": s("1"), "g": s("x")}}); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "DynamoDB.PutItem", Stat{Calls: 1, BilledWriteUnits: 2, BilledIndexWriteUnits: 1, BilledIndexes: map[string]float64{"g": 1}})
	if st := c.Snapshot()["DynamoDB.CreateTable"]; st.Calls != 1 || st.Unbilled != 0 || st.BilledWriteUnits != 0 {
		t.Fatalf("create table %+v", st)
	}
}

func expect(t *testing.T, c *Counter, op string, want Stat) {
	t.Helper()
	got := c.Snapshot()[op]
	if got.Calls != want.Calls || got.Errors != want.Errors || got.BilledReadUnits != want.BilledReadUnits ||
		got.BilledWriteUnits != want.BilledWriteUnits || got.BilledIndexWriteUnits != want.BilledIndexWriteUnits ||
		got.Unbilled != want.Unbilled || len(got.BilledIndexes) != len(want.BilledIndexes) {
		t.Fatalf("%s: %+v, want %+v", op, got, want)
	}
	for name, u := range want.BilledIndexes {
		if got.BilledIndexes[name] != u {
			t.Fatalf("%s: index %s %v, want %v", op, name, got.BilledIndexes[name], u)
		}
	}
}
