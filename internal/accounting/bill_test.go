package accounting

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

type item = map[string]types.AttributeValue

func s(v string) types.AttributeValue   { return &types.AttributeValueMemberS{Value: v} }
func num(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
func bin(n int) types.AttributeValue    { return &types.AttributeValueMemberB{Value: make([]byte, n)} }

// TestAttributeSizes follows "DynamoDB item sizes and formats" rule by rule.
func TestAttributeSizes(t *testing.T) {
	tests := []struct {
		name string
		v    types.AttributeValue
		want int
	}{
		{"string: UTF-8 bytes", s("héllo"), 6},
		{"empty string", s(""), 0},
		{"number: 1 byte per two significant digits, plus 1", num("123"), 3},
		{"number: leading and trailing zeroes trimmed", num("0.000120"), 2},
		{"number: sign and exponent are not digits", num("-1000E+2"), 2},
		{"zero", num("0"), 1},
		{"38 digits", num(strings.Repeat("9", 38)), 20},
		{"binary: raw bytes", bin(7), 7},
		{"boolean", &types.AttributeValueMemberBOOL{Value: true}, 1},
		{"null", &types.AttributeValueMemberNULL{Value: true}, 1},
		{"empty list: 3", &types.AttributeValueMemberL{}, 3},
		{"list: 3 + elements + 1 per element", &types.AttributeValueMemberL{Value: []types.AttributeValue{s("ab"), num("1")}}, 3 + 3 + 3},
		{"empty map: 3", &types.AttributeValueMemberM{}, 3},
		{"map: 3 + names + values + 1 per element", &types.AttributeValueMemberM{Value: item{"k": s("v"), "nn": num("12")}}, 3 + (1 + 1 + 1) + (2 + 2 + 1)},
		{"string set", &types.AttributeValueMemberSS{Value: []string{"a", "bc"}}, 3},
		{"number set", &types.AttributeValueMemberNS{Value: []string{"1", "22"}}, 4},
		{"binary set", &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}}, 3},
	}
	for _, tt := range tests {
		if got := AttributeSize(tt.v); got != tt.want {
			t.Errorf("%s: %d bytes, want %d", tt.name, got, tt.want)
		}
	}
	if got := ItemSize(item{"pk": s("SAGA#1"), "v": num("7")}); got != 2+6+1+2 {
		t.Errorf("item: %d bytes, want names plus values, %d", got, 2+6+1+2)
	}
}

// TestUnits holds the units to the Developer Guide's worked examples in
// "DynamoDB read and write operations" and "Condition expressions".
func TestUnits(t *testing.T) {
	const kb = 1024
	for _, tt := range []struct {
		name string
		got  float64
		want float64
	}{
		{"a 3,500-byte item reads as 4 KB: 1 strongly consistent unit", ReadUnits(3500, true), 1},
		{"an 8 KB item: 2 strongly consistent units", ReadUnits(8*kb, true), 2},
		{"an 8 KB item: 1 eventually consistent unit", ReadUnits(8*kb, false), 1},
		{"a 10 KB item rounds to 12 KB: 3 units", ReadUnits(10*kb, true), 3},
		{"a missing item still bills the minimum", ReadUnits(0, true), 1},
		{"eventually consistent minimum", ReadUnits(0, false), 0.5},
		{"a 500-byte write bills as 1 KB", WriteUnits(500), 1},
		{"1 KB exactly", WriteUnits(kb), 1},
		{"1 KB and a byte", WriteUnits(kb + 1), 2},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}

	// "Condition expressions": an existing item of 300 KB, a new one of
	// 310 KB: 300 units if the condition fails, 310 if it holds; no
	// existing item: 1 if it fails, 310 if it holds. (Sizes here are the
	// whole item: key and blob.)
	none := &TableSchema{Key: []string{"pk"}}
	key := item{"pk": s("k")}
	blob := func(size int) item { return item{"pk": s("k"), "b": bin(size*kb - ItemSize(key) - 1)} }
	if u := FailedConditionBill(blob(300)).WriteUnits; u != 300 {
		t.Errorf("failed condition on a 300 KB item: %v units, want 300", u)
	}
	if u := none.WriteBill(blob(300), blob(310)).WriteUnits; u != 310 {
		t.Errorf("300 KB replaced by 310 KB: %v units, want 310", u)
	}
	if u := FailedConditionBill(nil).WriteUnits; u != 1 {
		t.Errorf("failed condition on no item: %v units, want 1", u)
	}
	if u := none.WriteBill(nil, blob(310)).WriteUnits; u != 310 {
		t.Errorf("new 310 KB item: %v units, want 310", u)
	}
	// The larger of before and after, both ways, and a delete.
	if u := none.WriteBill(blob(3), blob(1)).WriteUnits; u != 3 {
		t.Errorf("3 KB replaced by 1 KB: %v units, want 3", u)
	}
	if u := none.WriteBill(blob(2), nil).WriteUnits; u != 2 {
		t.Errorf("delete of a 2 KB item: %v units, want 2", u)
	}
	if u := none.WriteBill(nil, nil).WriteUnits; u != 1 {
		t.Errorf("delete of nothing: %v units, want 1", u)
	}
}

// byStatus is a table like the store's: an index keyed on gsi1pk/gsi1sk
// projecting st and v.
func byStatus(p types.ProjectionType, include ...string) *TableSchema {
	return &TableSchema{Key: []string{"pk", "sk"}, Indexes: []IndexSchema{{Name: "by_status", Key: []string{"gsi1pk", "gsi1sk"}, Projection: p, NonKeyAttributes: include}}}
}

func saga(status, since, version string, extra ...string) item {
	it := item{"pk": s("SAGA#1"), "sk": s("STATE"), "st": s(status), "v": num(version), "state": bin(100)}
	if since != "" {
		it["gsi1pk"], it["gsi1sk"] = s("STATUS#"+status), s(since+"#1")
	}
	for i := 0; i+1 < len(extra); i += 2 {
		it[extra[i]] = s(extra[i+1])
	}
	return it
}

// TestIndexWrites covers every index rule.
func TestIndexWrites(t *testing.T) {
	include := byStatus(types.ProjectionTypeInclude, "st", "v")
	big := item{"pk": s("SAGA#1"), "sk": s("STATE"), "gsi1pk": s("STATUS#running"), "gsi1sk": s(strings.Repeat("9", 1100))}
	tests := []struct {
		name          string
		schema        *TableSchema
		before, after item
		want          float64
	}{
		{"in the index neither before nor after", include, saga("running", "", "1"), saga("running", "", "2"), 0},
		{"neither: no item at all (a delete of nothing)", include, nil, nil, 0},
		{"new entry: 1", include, nil, saga("running", "100", "1"), 1},
		{"entry gains its key attributes on an update: 1", include, saga("running", "", "1"), saga("running", "100", "2"), 1},
		{"entry removed: 1", include, saga("running", "100", "1"), saga("running", "", "2"), 1},
		{"item deleted: 1", include, saga("running", "100", "1"), nil, 1},
		{"index key changed (status): 2, delete and put", include, saga("running", "100", "1"), saga("succeeded", "100", "2"), 2},
		{"index sort key changed (time): 2", include, saga("running", "100", "1"), saga("running", "200", "1"), 2},
		{"same key, a projected attribute changed: 1", include, saga("running", "100", "1"), saga("running", "100", "2"), 1},
		{"same key, only unprojected attributes changed: 0", include, saga("running", "100", "1"), saga("running", "100", "1", "ttl", "9"), 0},
		{"nothing changed: 0", include, saga("running", "100", "1"), saga("running", "100", "1"), 0},
		{"keys only: a non-key change costs nothing", byStatus(types.ProjectionTypeKeysOnly), saga("running", "100", "1"), saga("running", "100", "2"), 0},
		{"all: any change is projected", byStatus(types.ProjectionTypeAll), saga("running", "100", "1"), saga("running", "100", "1", "ttl", "9"), 1},
		{"an entry over 1 KB: 1 write per KB", include, nil, big, 2},
		{"a moved entry over 1 KB: each write by its own size", include, big, saga("running", "100", "1"), 2 + 1},
	}
	for _, tt := range tests {
		got := tt.schema.IndexWrites(&tt.schema.Indexes[0], tt.before, tt.after)
		if got != tt.want {
			t.Errorf("%s: %v index writes, want %v", tt.name, got, tt.want)
		}
		b := tt.schema.WriteBill(tt.before, tt.after)
		if b.IndexUnits() != tt.want || b.IndexWriteUnits["by_status"] != tt.want {
			t.Errorf("%s: bill %+v, want %v on by_status", tt.name, b, tt.want)
		}
	}
}

func TestSchemaFromCreateTableAndDescription(t *testing.T) {
	gsi := []types.KeySchemaElement{{AttributeName: aws.String("g2"), KeyType: types.KeyTypeRange}, {AttributeName: aws.String("g1"), KeyType: types.KeyTypeHash}}
	in := &dynamodb.CreateTableInput{
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("g"), KeySchema: gsi,
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"a"}}}},
		LocalSecondaryIndexes: []types.LocalSecondaryIndex{{IndexName: aws.String("l"), KeySchema: gsi[:1], Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}},
	}
	d := &types.TableDescription{
		KeySchema: in.KeySchema,
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndexDescription{{IndexName: aws.String("g"), KeySchema: gsi,
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: []string{"a"}}}},
		LocalSecondaryIndexes: []types.LocalSecondaryIndexDescription{{IndexName: aws.String("l"), KeySchema: gsi[:1], Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}},
	}
	for _, sc := range []TableSchema{SchemaFromCreateTable(in), SchemaFromDescription(d)} {
		if len(sc.Key) != 1 || sc.Key[0] != "pk" || len(sc.Indexes) != 2 {
			t.Fatalf("%+v", sc)
		}
		g, l := sc.Indexes[0], sc.Indexes[1]
		if g.Name != "g" || g.Key[0] != "g1" || g.Key[1] != "g2" || g.Projection != types.ProjectionTypeInclude || g.NonKeyAttributes[0] != "a" {
			t.Errorf("global index %+v: want g1 then g2, INCLUDE a", g)
		}
		if l.Name != "l" || l.Projection != types.ProjectionTypeAll {
			t.Errorf("local index %+v", l)
		}
	}
}

func TestApplyUpdate(t *testing.T) {
	key := item{"pk": s("k")}
	before := item{"pk": s("k"), "n": num("1.5"), "gone": s("x"), "tags": &types.AttributeValueMemberSS{Value: []string{"a"}}}
	vals := item{":v": s("new"), ":one": num("1"), ":half": num("0.25"), ":tag": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, ":zero": num("0")}
	names := map[string]string{"#n": "n", "#c": "count"}
	after, err := ApplyUpdate(before, key,
		"SET a = :v, #n = #n + :half, #c = if_not_exists(#c, :zero) + :one REMOVE gone ADD tags :tag, rs :one", names, vals)
	if err != nil {
		t.Fatal(err)
	}
	want := item{"pk": s("k"), "a": s("new"), "n": num("1.75"), "count": num("1"), "tags": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, "rs": num("1")}
	if !EqualItems(after, want) {
		t.Fatalf("after %v, want %v", after, want)
	}
	if len(before) != 4 {
		t.Fatal("the item before was changed")
	}
	// A missing item is created from its key; subtraction; reading the
	// item before the update on the right-hand side.
	after, err = ApplyUpdate(nil, key, "set x = :one - :half", nil, vals)
	if err != nil || !EqualItems(after, item{"pk": s("k"), "x": num("0.75")}) {
		t.Fatalf("from nothing: %v %v", after, err)
	}
	after, err = ApplyUpdate(before, key, "SET n = :one, m = n", nil, vals)
	if err != nil || !EqualValues(after["m"], num("1.5")) {
		t.Fatalf("right-hand side read after the left: %v %v", after, err)
	}
	for _, expr := range []string{
		"SET a.b = :v",               // nested path
		"SET a[0] = :v",              // list element
		"SET a = list_append(a, :v)", // function
		"DELETE tags :tag",           // DELETE clause
		"SET a = missing + :one",     // a path that does not exist
		"SET a = :nope",              // undefined value
		"SET #nope = :v",             // undefined name
		"SET a = :v + :one",          // arithmetic on a string
		"SET a = :v; DROP TABLE",     // not an expression
		"ADD n :v",                   // adding a string to a number
	} {
		if _, err := ApplyUpdate(before, key, expr, names, vals); !errors.Is(err, errUnsupported) {
			t.Errorf("%q: %v, want unsupported", expr, err)
		}
	}
}
