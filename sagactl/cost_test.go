package sagactl_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// TestCostRefusesFiguresThatAreNotPositive: each figure must be a finite
// number above zero; the error names the flag.
func TestCostRefusesFiguresThatAreNotPositive(t *testing.T) {
	for _, flag := range []string{"--steps-per-month", "--sagas-per-month", "--batch-size", "--memory", "--state-bytes", "--duration"} {
		values := []string{"-1", "0", "NaN", "+Inf", "-Inf"}
		switch flag {
		case "--memory", "--state-bytes":
			values = []string{"-1", "0"} // integers: NaN does not parse
		case "--duration":
			values = []string{"-1ms", "0s"}
		}
		for _, v := range values {
			r := runSagactl(t, nil, "cost", orderFile, flag, v)
			if r.code != sagactl.ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, "cost: "+flag+": must be") {
				t.Errorf("cost %s %s: exit %d\nstdout %q\nstderr %q", flag, v, r.code, r.stdout, r.stderr)
			}
		}
	}
	r := runSagactl(t, nil, "cost", orderFile, "--sagas-per-month", "1000", "--batch-size", "2.5", "--memory", "512", "--duration", "20ms", "--state-bytes", "900")
	if r.code != sagactl.ExitOK || strings.Contains(r.stdout, "NaN") || strings.Contains(r.stdout, "Inf") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
