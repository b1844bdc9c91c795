package accounting

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Item sizes and the units they bill, by the DynamoDB Developer Guide:
// "DynamoDB item sizes and formats" (CapacityUnitCalculations.html) for
// sizes, "DynamoDB read and write operations" (read-write-operations.html)
// for units.

// ItemSize is an item's size as DynamoDB counts it: the UTF-8 bytes of
// each attribute's name plus the size of its value (AttributeSize).
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + AttributeSize(v)
	}
	return n
}

// AttributeSize is the size of an attribute value without its name: a
// string's UTF-8 bytes; a number's 1 byte per two significant digits plus
// 1 (the guide says "approximately"; leading and trailing zeroes do not
// count); a binary's raw bytes; 1 for a null or a Boolean; 3 for a list or
// map plus each element's size plus 1 byte per element (a map element's
// size includes its name). A set is the sum of its elements' sizes: the
// guide gives no overhead for sets. An unknown value type counts 0.
func AttributeSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return NumberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += AttributeSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += len(k) + AttributeSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += NumberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	}
	return 0
}

// NumberSize is the size of a DynamoDB number given as text ("-12.50",
// "1E+3"): 1 byte per two significant digits, rounded up, plus 1. Zero is
// 1 byte.
func NumberSize(text string) int {
	mantissa, _, _ := strings.Cut(strings.ToLower(text), "e")
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, mantissa)
	digits = strings.TrimLeft(digits, "0")
	digits = strings.TrimRight(digits, "0")
	return (len(digits)+1)/2 + 1
}

// Unit sizes: a write unit covers 1 KB, a read unit 4 KB.
const (
	writeUnitBytes = 1024
	readUnitBytes  = 4096
)

// WriteUnits is what writing size bytes bills: 1 unit per KB, rounded up,
// and at least 1 (the guide's example: a 500-byte item bills as 1 KB).
func WriteUnits(size int) float64 {
	return float64(max(1, (size+writeUnitBytes-1)/writeUnitBytes))
}

// ReadUnits is what reading size bytes in one request bills: 1 unit per
// 4 KB, rounded up and at least 1 (a read of a missing item, or a query
// that finds nothing, still bills the minimum), halved for an eventually
// consistent read.
func ReadUnits(size int, consistent bool) float64 {
	u := float64(max(1, (size+readUnitBytes-1)/readUnitBytes))
	if !consistent {
		u /= 2
	}
	return u
}
