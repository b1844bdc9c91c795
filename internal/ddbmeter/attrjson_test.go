package ddbmeter

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/internal/accounting"
)

// TestDecodeItem reads every attribute type of the JSON protocol into the
// values the size rules take: the sizes prove each type decoded.
func TestDecodeItem(t *testing.T) {
	raw := `{"s":{"S":"héllo"},"n":{"N":"123"},"b":{"B":"AAEC"},"t":{"BOOL":true},"z":{"NULL":true},
		"l":{"L":[{"S":"ab"},{"N":"1"}]},"m":{"M":{"k":{"S":"v"}}},"ss":{"SS":["a","bc"]},"ns":{"NS":["1","22"]},"bs":{"BS":["AQ==","AgM="]}}`
	it, err := decodeItem([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"s": 6, "n": 3, "b": 3, "t": 1, "z": 1, "l": 9, "m": 6, "ss": 3, "ns": 4, "bs": 3}
	for name, size := range want {
		if got := accounting.AttributeSize(it[name]); got != size {
			t.Errorf("%s: %T of %d bytes, want %d", name, it[name], got, size)
		}
	}
	if _, ok := it["bs"].(*types.AttributeValueMemberBS); !ok || len(it) != len(want) {
		t.Fatalf("%v", it)
	}
	if it, err := decodeItem(nil); it != nil || err != nil {
		t.Fatalf("no item: %v %v", it, err)
	}
	for _, bad := range []string{`{"a":{"X":"1"}}`, `{"a":{"S":"x","N":"1"}}`, `{"a":{"B":"not base64!"}}`} {
		if _, err := decodeItem([]byte(bad)); err == nil {
			t.Errorf("%s: decoded", bad)
		}
	}
}
