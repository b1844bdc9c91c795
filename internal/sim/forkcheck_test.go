package sim

import "testing"

// The order check of a parent's step against a child run of its fork, on
// the ledger's seqs. The first case is seed 5's s5-487 (fork8): fork f2
// failed and was caught, its children were undone (12615-12899), then
// a17 ran (13046) and, when the saga failed later, was undone (14827):
// the order kept, which the check once called broken.
func TestStepOrderAgainstChild(t *testing.T) {
	for _, tt := range []struct {
		name   string
		o      stepOrder
		broken bool
	}{
		{"step after a caught fork, done once its children were undone", stepOrder{fork: 4918, done: 13046, undone: 14827, lo: 12615, hi: 12899, undoing: true}, false},
		{"step after the fork undone before the child", stepOrder{fork: 10, done: 20, undone: 25, lo: 30, hi: 40, undoing: true}, false},
		{"step after the fork undone after the child began undoing", stepOrder{fork: 10, done: 20, undone: 35, lo: 30, hi: 40, undoing: true}, true},
		{"step after the fork undone after the child", stepOrder{fork: 10, done: 20, undone: 50, lo: 30, hi: 40, undoing: true}, true},
		{"step after the fork done while the child compensated", stepOrder{fork: 10, done: 35, undone: 50, lo: 30, hi: 40, undoing: true}, true},
		{"step after the fork done while a cancelled child compensated", stepOrder{fork: 10, done: 35, lo: 30, hi: 40}, true},
		{"step after the fork, child compensated itself before the join", stepOrder{fork: 10, done: 50, undone: 60, lo: 30, hi: 40}, false},
		{"step after the fork not undone", stepOrder{fork: 10, done: 20, lo: 30, hi: 40, undoing: true}, false},
		{"step before the fork undone after the child", stepOrder{fork: 10, done: 5, undone: 45, lo: 30, hi: 40, undoing: true}, false},
		{"step before the fork undone before the child ended", stepOrder{fork: 10, done: 5, undone: 35, lo: 30, hi: 40, undoing: true}, true},
		{"step before the fork undone before the child began", stepOrder{fork: 10, done: 5, undone: 25, lo: 30, hi: 40, undoing: true}, true},
		{"step before the fork not undone", stepOrder{fork: 10, done: 5, lo: 30, hi: 40, undoing: true}, false},
	} {
		if got := tt.o.broken(); (got != "") != tt.broken {
			t.Errorf("%s: broken() = %q, want broken %v", tt.name, got, tt.broken)
		}
	}
}
