package saga

import (
	"testing"
	"time"
)

// A tracked evaluation's deadline scales with the elements of the data the
// expression names (and only those): 100 ms times (n / 2,000)², at least
// once and at most 25 times.
func TestEvalDeadlineScalesWithTheDataRead(t *testing.T) {
	t.Parallel()
	p := mustPlan(t, "saga: cel\ninput: {items: list, other: list}\nsteps: [{id: s, set: {x: 1}}]")
	env, err := newCELEnv(p.def)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{}.withDefaults()
	prg, probs := compileExpr(env, "input.items.map(x, x * 2)", opts)
	if probs != nil || !prg.tracked {
		t.Fatalf("problems %v, tracked %v", probs, prg.tracked)
	}
	list := func(n int) []any {
		l := make([]any, n)
		for i := range l {
			l[i] = int64(i)
		}
		return l
	}
	for _, tt := range []struct {
		items, other int
		want         time.Duration
	}{
		{0, 0, 100 * time.Millisecond},
		{3999, 0, 100 * time.Millisecond},
		{4000, 0, 400 * time.Millisecond},
		{6000, 0, 900 * time.Millisecond},
		{10_000, 0, 2500 * time.Millisecond},
		{100_000, 0, 2500 * time.Millisecond},
		{0, 100_000, 100 * time.Millisecond}, // a field it does not read
	} {
		act := &activation{st: &State{Input: map[string]any{"items": list(tt.items), "other": list(tt.other)}}, vars: map[string]any{}}
		if got := prg.scaledTimeout(act); got != tt.want {
			t.Errorf("%d items (%d elsewhere): deadline %s, want %s", tt.items, tt.other, got, tt.want)
		}
	}
}
