package sagactl_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// TestSubcommandHelp: SUB --help (or -h) shows that command's usage and
// flags on stdout and exits 0.
func TestSubcommandHelp(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "--help"}, []string{"Usage: sagactl run FILE --input", "-fail", "-input", "-timeout"}},
		{[]string{"plan", "-h"}, []string{"Usage: sagactl plan FILE --fail STEP", "-fail"}},
		{[]string{"validate", "--help"}, []string{"Usage: sagactl validate FILE..."}},
		{[]string{"status", "--help"}, []string{"Usage: sagactl status ID", "-table"}},
		{[]string{"history", "--help"}, []string{"Usage: sagactl history ID", "-json", "-table"}},
		{[]string{"cost", orderFile, "--help"}, []string{"Usage: sagactl cost FILE", "-memory"}},
	} {
		r := runSagactl(t, nil, tt.args...)
		if r.code != sagactl.ExitOK || r.stderr != "" {
			t.Errorf("%v: exit %d, stderr %q", tt.args, r.code, r.stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("%v: stdout lacks %q:\n%s", tt.args, w, r.stdout)
			}
		}
	}
}

// TestRunRefusesBadFlagsBeforeStarting: an id that cannot name a saga and
// a timeout that is not positive are refused before anything starts.
func TestRunRefusesBadFlagsBeforeStarting(t *testing.T) {
	base := []string{"run", orderFile, "--input", "@../examples/order/testdata/ok.json"}
	for _, tt := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--id", "a/b"}, "--id: not a saga id: use 1 to 128 letters, digits, '_', '.', ':' or '-', starting with a letter or digit"},
		{[]string{"--id", strings.Repeat("x", 129)}, "--id: not a saga id"},
		{[]string{"--timeout", "-1s"}, "--timeout: must be positive"},
		{[]string{"--timeout", "0s"}, "--timeout: must be positive"},
	} {
		r := runSagactl(t, nil, append(base, tt.flags...)...)
		if r.code != sagactl.ExitUsage || r.stdout != "" || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q", tt.flags, r.code, r.stdout, r.stderr, tt.want)
		}
	}
	r := runSagactl(t, nil, "start", orderFile, "--input", "@../examples/order/testdata/ok.json", "--id", "a/b", "--local")
	if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "--id: not a saga id") {
		t.Errorf("start --id a/b: exit %d, stderr %q", r.code, r.stderr)
	}
}
