package saga_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// TestDryRunEndsOrSaysSo: a dry run returns a final state, or an error
// saying it did not end; never a saga still waiting, as if final.
func TestDryRunEndsOrSaysSo(t *testing.T) {
	t.Parallel()
	// With every output equal to its input, vars.r.n stays 0: the loop
	// never ends on its own.
	plan := mustCompile(t, `
saga: forever
input: {n: int}
steps:
  - id: poll
    action: jobs.poll
    with: {n: "${input.n}"}
    out: r
  - id: again
    switch:
      - {if: "vars.r.n == 0", next: poll}
  - id: done
    succeed: {}
`)
	in, err := plan.CheckInput(map[string]any{"n": int64(0)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := plan.DryRun(saga.DryRunParams{Input: in})
	if err != nil {
		if !strings.Contains(err.Error(), "did not end") {
			t.Fatalf("error %v does not say the dry run did not end", err)
		}
		return
	}
	if _, pending := st.Pending(); pending || !st.Status.Final() {
		t.Fatalf("dry run returned a saga still %s, pending %v, and no error", st.Status, pending)
	}
}
