package ddbmeter

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// decodeItem reads an item in the DynamoDB JSON protocol's form
// ({"name": {"S": "x"}, ...}) into the SDK's attribute values, which the
// billing functions of package accounting take. A missing or null item
// is nil.
func decodeItem(raw json.RawMessage) (map[string]types.AttributeValue, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	if fields == nil {
		return nil, nil
	}
	item := make(map[string]types.AttributeValue, len(fields))
	for name, f := range fields {
		v, err := decodeValue(f)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", name, err)
		}
		item[name] = v
	}
	return item, nil
}

func decodeValue(raw json.RawMessage) (types.AttributeValue, error) {
	var typed map[string]json.RawMessage
	if err := json.Unmarshal(raw, &typed); err != nil {
		return nil, err
	}
	if len(typed) != 1 {
		return nil, fmt.Errorf("a value has one type, not %d", len(typed))
	}
	for kind, v := range typed {
		switch kind {
		case "S":
			var s string
			err := json.Unmarshal(v, &s)
			return &types.AttributeValueMemberS{Value: s}, err
		case "N":
			var s string
			err := json.Unmarshal(v, &s)
			return &types.AttributeValueMemberN{Value: s}, err
		case "B":
			b, err := decodeBytes(v)
			return &types.AttributeValueMemberB{Value: b}, err
		case "BOOL":
			var b bool
			err := json.Unmarshal(v, &b)
			return &types.AttributeValueMemberBOOL{Value: b}, err
		case "NULL":
			return &types.AttributeValueMemberNULL{Value: true}, nil
		case "SS", "NS":
			var ss []string
			if err := json.Unmarshal(v, &ss); err != nil {
				return nil, err
			}
			if kind == "SS" {
				return &types.AttributeValueMemberSS{Value: ss}, nil
			}
			return &types.AttributeValueMemberNS{Value: ss}, nil
		case "BS":
			var raws []json.RawMessage
			if err := json.Unmarshal(v, &raws); err != nil {
				return nil, err
			}
			bs := make([][]byte, len(raws))
			for i, r := range raws {
				b, err := decodeBytes(r)
				if err != nil {
					return nil, err
				}
				bs[i] = b
			}
			return &types.AttributeValueMemberBS{Value: bs}, nil
		case "L":
			var raws []json.RawMessage
			if err := json.Unmarshal(v, &raws); err != nil {
				return nil, err
			}
			l := make([]types.AttributeValue, len(raws))
			for i, r := range raws {
				e, err := decodeValue(r)
				if err != nil {
					return nil, err
				}
				l[i] = e
			}
			return &types.AttributeValueMemberL{Value: l}, nil
		case "M":
			m, err := decodeItem(v)
			if m == nil {
				m = map[string]types.AttributeValue{}
			}
			return &types.AttributeValueMemberM{Value: m}, err
		default:
			return nil, fmt.Errorf("unknown type %q", kind)
		}
	}
	panic("unreachable")
}

func decodeBytes(v json.RawMessage) ([]byte, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(s)
}

// keyJSON is the JSON of an item's key attributes, taken as they were
// sent (so the meter's own GetItem asks for exactly that key).
func keyJSON(item map[string]json.RawMessage, key []string) (json.RawMessage, error) {
	k := make(map[string]json.RawMessage, len(key))
	for _, name := range key {
		v, ok := item[name]
		if !ok {
			return nil, fmt.Errorf("item lacks key attribute %s", name)
		}
		k[name] = v
	}
	return json.Marshal(k)
}

// lockName names one item for the per-item locks: its table and its key
// attributes in order.
func lockName(table string, key map[string]json.RawMessage) string {
	var b strings.Builder
	b.WriteString(table)
	for _, name := range slices.Sorted(maps.Keys(key)) {
		b.WriteString("\x00" + name + "\x00")
		b.Write(key[name])
	}
	return b.String()
}
