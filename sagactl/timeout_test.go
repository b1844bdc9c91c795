package sagactl_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// TestValidateStepTimeoutsAgainstTheFunction: a step timeout the function
// that runs it cannot give (its timeout less saga.ResultReserve) is
// refused before the saga runs, from --function-timeout or the template.
func TestValidateStepTimeoutsAgainstTheFunction(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want []string // on stderr, or stdout when the code is ExitOK
	}{
		{[]string{orderFile, "--function-timeout", "30s"}, sagactl.ExitOK, []string{"order.yaml: ok"}},
		{[]string{orderFile, "--function-timeout", "13s"}, sagactl.ExitOK, []string{"order.yaml: ok"}}, // limit 10s (13 less 1 and 2): the order's 10s fit
		{[]string{orderFile, "--function-timeout", "10s"}, sagactl.ExitUsage, []string{
			"step reserve: timeout: 10s is longer than the 7s the function can give an action (its timeout less 1s to load the saga and 2s kept to record the result)",
			"step charge: timeout: 10s is longer than the 7s",
			"order.yaml: 2 problem(s)",
			"(step timeouts checked against a function with timeout 10s: at most 7s)",
		}},
		{[]string{"testdata/longundo.yaml", "--function-timeout", "30s"}, sagactl.ExitUsage, []string{
			"step book: compensate.timeout: 5m is longer than the 27s the function can give an action",
			"longundo.yaml: 1 problem(s)",
		}},
		{[]string{orderFile, "--template", "../infra/template.yaml"}, sagactl.ExitOK, []string{"order.yaml: ok"}},
		{[]string{orderFile, "--template", "testdata/short-template.yaml"}, sagactl.ExitUsage, []string{
			"step reserve: timeout: 10s is longer than the 2s the function can give an action",
			"step charge: timeout: 10s is longer than the 2s",
			"(step timeouts checked against function AdvanceFunction of testdata/short-template.yaml (timeout 5s): at most 2s)",
		}},
		{[]string{orderFile, "--function-timeout", "2s"}, sagactl.ExitUsage, []string{"--function-timeout: 2s leaves no time for an action: a function keeps 2s of its timeout to record the outcome"}},
		{[]string{orderFile, "--function-timeout", "-1s"}, sagactl.ExitUsage, []string{"--function-timeout: must be positive"}},
		{[]string{orderFile, "--function-timeout", "16m"}, sagactl.ExitUsage, []string{"--function-timeout: 16m0s is over Lambda's limit of 15m"}},
		{[]string{orderFile, "--function-timeout", "30s", "--template", "../infra/template.yaml"}, sagactl.ExitUsage, []string{"give --function-timeout or --template, not both"}},
		{[]string{orderFile, "--template", "/dev/zero"}, sagactl.ExitUsage, []string{"--template: /dev/zero: over the limit of"}},
		{[]string{orderFile, "--template", orderFile}, sagactl.ExitUsage, []string{"--template: " + orderFile + ": no Resources"}},
		{[]string{orderFile, "--template", "testdata/longundo.yaml"}, sagactl.ExitUsage, []string{"--template: " + "testdata/longundo.yaml: no Resources"}},
	}
	for _, tt := range tests {
		r := runSagactl(t, nil, append([]string{"validate"}, tt.args...)...)
		out := r.stderr
		if tt.code == sagactl.ExitOK {
			out = r.stdout
		}
		if r.code != tt.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", tt.args, r.code, tt.code, r.stdout, r.stderr)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tt.args, w, out)
			}
		}
	}
}
