package sagactl_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// list --since too far back to count is a usage error, in days as in
// hours, before any AWS call: it never wraps round to a time that lists
// nothing.
func TestListRefusesSincePastTheDurationRange(t *testing.T) {
	t.Parallel()
	for _, since := range []string{"99999999999999d", "99999999999999h", "-1h"} {
		r := runSagactl(t, nil, "list", "--since", since)
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "since") {
			t.Errorf("list --since %s: exit %d, want %d; stderr:\n%s", since, r.code, sagactl.ExitUsage, r.stderr)
		}
	}
}
