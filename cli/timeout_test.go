package cli_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/cli"
)

// TestValidateStepTimeoutsAgainstTheFunction: a step timeout the function
// that runs it cannot give (its timeout less engine.ResultReserve) is
// refused before the saga runs, from --function-timeout or the template.
func TestValidateStepTimeoutsAgainstTheFunction(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want []string // on stderr, or stdout when the code is ExitOK
	}{
		{[]string{orderFile, "--function-timeout", "30s"}, cli.ExitOK, []string{"order.yaml: ok"}},
		{[]string{orderFile, "--function-timeout", "12s"}, cli.ExitOK, []string{"order.yaml: ok"}}, // limit 10s: the order's 10s fit
		{[]string{orderFile, "--function-timeout", "10s"}, cli.ExitUsage, []string{
			"order.yaml:13:5: step reserve: timeout: 10s is longer than 8s, the longest a function with timeout 10s can give an action (its timeout less 2s to record the outcome)\n",
			"order.yaml:26:5: step charge: timeout: 10s is longer than 8s",
			"order.yaml: 2 problem(s)",
		}},
		{[]string{"testdata/longundo.yaml", "--function-timeout", "30s"}, cli.ExitUsage, []string{
			"longundo.yaml:9:7: step book: compensate.timeout: 5m0s is longer than 28s, the longest a function with timeout 30s can give an action",
			"longundo.yaml: 1 problem(s)",
		}},
		{[]string{orderFile, "--template", "../infra/template.yaml"}, cli.ExitOK, []string{"order.yaml: ok"}},
		{[]string{orderFile, "--template", "testdata/short-template.yaml"}, cli.ExitUsage, []string{
			"order.yaml:13:5: step reserve: timeout: 10s is longer than 3s, the longest function AdvanceFunction of testdata/short-template.yaml (timeout 5s) can give an action (its timeout less 2s to record the outcome)\n",
			"step charge: timeout: 10s is longer than 3s",
		}},
		{[]string{orderFile, "--function-timeout", "2s"}, cli.ExitUsage, []string{"--function-timeout: 2s leaves no time for an action: a function keeps 2s of its timeout to record the outcome"}},
		{[]string{orderFile, "--function-timeout", "-1s"}, cli.ExitUsage, []string{"--function-timeout: must be positive"}},
		{[]string{orderFile, "--function-timeout", "30s", "--template", "../infra/template.yaml"}, cli.ExitUsage, []string{"give --function-timeout or --template, not both"}},
		{[]string{orderFile, "--template", "/dev/zero"}, cli.ExitUsage, []string{"--template: /dev/zero: over the limit of"}},
		{[]string{orderFile, "--template", orderFile}, cli.ExitUsage, []string{"--template: " + orderFile + ": no Resources"}},
		{[]string{orderFile, "--template", "testdata/longundo.yaml"}, cli.ExitUsage, []string{"--template: " + "testdata/longundo.yaml: no Resources"}},
	}
	for _, tt := range tests {
		r := sagactl(t, nil, append([]string{"validate"}, tt.args...)...)
		out := r.stderr
		if tt.code == cli.ExitOK {
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
