package sagactl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

// A saga still running at --timeout is not a usage error: run exits with
// its own code, and says so; run --help lists every exit code.
func TestRunStillRunningAtTimeoutHasItsOwnExitCode(t *testing.T) {
	t.Parallel()
	reg := engine.NewRegistry()
	reg.MustRegister("slow.wait", func(ctx context.Context, c saga.Call) (any, error) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		return nil, nil
	})
	r := runSagactl(t, reg, "run", "testdata/slow.yaml", "--input", "{}", "--timeout", "100ms")
	if r.code != sagactl.ExitStillRunning || r.code == sagactl.ExitUsage {
		t.Errorf("exit %d, want %d\n%s%s", r.code, sagactl.ExitStillRunning, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "still running at --timeout 100ms") {
		t.Errorf("stderr does not say the saga is still running:\n%s", r.stderr)
	}
	help := runSagactl(t, nil, "run", "--help")
	for _, want := range []string{"Exit codes:", "0 ", "1 ", "2 ", "3 ", "4 ", "still running at --timeout"} {
		if !strings.Contains(help.stdout, want) {
			t.Errorf("run --help lacks %q:\n%s", want, help.stdout)
		}
	}
}
