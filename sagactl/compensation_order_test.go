package sagactl_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/sagactl"
)

// run's summary lists the compensations in the order they ran, and says
// so: a fork's children undo in their own runs, so "newest first" would
// not hold for every saga. The list is the order of the undo lines above
// it.
func TestRunListsCompensationsInTheOrderTheyRan(t *testing.T) {
	t.Parallel()
	r := runSagactl(t, nil, "run", "testdata/comporder/main.yaml", "--fail", "z")
	if r.code != sagactl.ExitCompensated {
		t.Fatalf("exit %d, want %d\n%s%s", r.code, sagactl.ExitCompensated, r.stdout, r.stderr)
	}
	var ran []string
	for _, m := range regexp.MustCompile(`(?m)^  undo (\S+) +(\S+)`).FindAllStringSubmatch(r.stdout, -1) {
		ran = append(ran, m[1]+" ("+m[2]+")")
	}
	want := "compensations, in the order they ran: " + strings.Join(ran, ", ") + "\n"
	if len(ran) != 4 || !strings.Contains(r.stdout, want) {
		t.Errorf("want %q in:\n%s", want, r.stdout)
	}
	if strings.Contains(r.stdout, "newest first") {
		t.Errorf("the summary still says newest first:\n%s", r.stdout)
	}
}
