package saga

import (
	"fmt"
	"testing"
)

// TestAllocs pins the allocation count of every run-time benchmark exactly
// (compiling CEL is left out: its count inside cel-go is not steady):
// counts are deterministic, so one more allocation fails here, on the change
// that adds it. When a change lowers a count, lower the pin with it. The
// budgets in bench/README.md are the ceilings the pins must stay under.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts; the pins hold in a normal build")
	}
	check := func(name string, want, budget float64, fn func()) {
		t.Helper()
		got := testing.AllocsPerRun(200, fn)
		if budget > 0 && got > budget {
			t.Errorf("%s: %v allocations, over the budget of %v", name, got, budget)
		}
		if got != want {
			t.Errorf("%s: %v allocations, pinned at %v: update the pin (and bench/README.md) if this is intended", name, got, want)
		}
	}
	for _, tc := range []struct {
		steps        int
		want, budget float64
	}{{1, 4, 0}, {10, 7, 0}, {100, 14, 200}} { // one of each the history (its first entries, and its growth to 100 steps)
		p := mustPlan(t, linearSetSaga(tc.steps))
		st := &State{}
		check(fmt.Sprintf("Advance/set_steps_%d", tc.steps), tc.want, tc.budget, func() { advanceWhole(p, st) })
	}
	pins := map[string][2]float64{ // want, budget
		"set_cel":    {0, 3},
		"map_100":    {943, 0},
		"filter_100": {792, 0},
		"switch":     {0, 0},
	}
	for _, sb := range stepBenches {
		_, r := sb.setup(t)
		pin := pins[sb.name]
		check("Step/"+sb.name, pin[0], pin[1], r.once)
	}
	st := benchState()
	buf, _ := st.MarshalBinary()
	out := make([]byte, 0, 1024)
	check("State/encode", 0, 0, func() { out, _ = st.AppendBinary(out[:0]) })
	var got State
	check("State/decode", 37, 0, func() { _ = got.UnmarshalBinary(buf) })
}
