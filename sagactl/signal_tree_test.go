package sagactl_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// sagactl run --signal reaches an await inside a child saga: the saga
// keeps it and gives it to the child as it starts, or, if the child
// awaits already, it goes to the child's await at once; without it the
// child's await times out and the saga compensates.
func TestRunSignalReachesAChildSagasAwait(t *testing.T) {
	file := "testdata/signal_child/order.yaml"
	r := runSagactl(t, nil, "run", file, "--signal", `approved={"by": "mia"}`)
	delivered := strings.Contains(r.stdout, "  signal approved    kept") || strings.Contains(r.stdout, "  signal approved    applied")
	if r.code != sagactl.ExitOK || !delivered || !strings.Contains(r.stdout, `"by":"mia"`) {
		t.Fatalf("with the signal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "run", file)
	if r.code != sagactl.ExitCompensated {
		t.Fatalf("without it: exit %d, want compensated\n%s%s", r.code, r.stdout, r.stderr)
	}
}
