package sagactl_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// TestCostRefusesFiguresNoDeploymentHas: sagactl
// cost refuses figures no deployment can have, each beyond a hard AWS
// limit, as it refuses those below zero: a state whose item is over DynamoDB's
// 400 KB item limit (the store refuses items over dynamo.MaxItemBytes, so
// such a saga fails; it is not billed $846 a month), a function memory
// over Lambda's 10,240 MB, an invocation longer than Lambda's 15 minutes
// (Lambda Developer Guide, "Lambda quotas"), a batch larger than an SQS
// event source's 10,000 messages. Each should be a usage error naming the
// flag.
func TestCostRefusesFiguresNoDeploymentHas(t *testing.T) {
	for _, c := range []struct{ flag, value string }{
		{"--state-bytes", "1000000"},
		{"--memory", "100000"},
		{"--duration", "30m"},
		{"--function-timeout", "30m"},
		{"--batch-size", "1e9"},
	} {
		r := runSagactl(t, nil, "cost", orderFile, c.flag, c.value, "--json")
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "cost: "+c.flag) {
			t.Errorf("cost %s %s: exit %d, want %d and an error naming the flag\nstdout %.200s\nstderr %q", c.flag, c.value, r.code, sagactl.ExitUsage, r.stdout, r.stderr)
		}
	}
}
