package durable_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
)

// A limit is refused before it is stored when no call could ever match
// it or the store could not keep it: an action name longer than any
// action's (its window keys would pass DynamoDB's 2,048-byte partition
// key, and it would grow the one limits item for nothing), or one with
// control characters.
func TestLimitCheckRefusesActionsNoCallCanHave(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		action string
		ok     bool
	}{
		{"a Go action", "inventory.reserve", true},
		{"a Lambda ARN", "lambda:arn:aws:lambda:us-east-1:123456789012:function:charge:live", true},
		{"the longest", strings.Repeat("a", durable.MaxLimitActionBytes), true},
		{"too long", strings.Repeat("a", durable.MaxLimitActionBytes+1), false},
		{"a newline", "pay\nments", false},
		{"empty", "", false},
	} {
		err := durable.Limit{Action: c.action, Rate: 10}.Check()
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
