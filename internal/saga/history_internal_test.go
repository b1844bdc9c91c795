package saga

import "testing"

// whatCode is entryWhats read backwards: every pair codes as its index.
func TestWhatCodesAreTheTable(t *testing.T) {
	t.Parallel()
	for i, w := range entryWhats {
		if got := whatCode(w.outcome, w.comp); int(got) != i {
			t.Errorf("%s (compensation %v): code %d, its index is %d", w.outcome, w.comp, got, i)
		}
	}
	if got := whatCode(OutcomeCompleted, true); got != whatCode(OutcomeCompleted, false) {
		t.Errorf("a completed compensation codes as %d, not as completed", got)
	}
}
