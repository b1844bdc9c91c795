package engine_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// A stable foreach list is evaluated again at every launch (PROTOCOL:
// "evaluated again when a child starts rather than kept twice"): a list
// built by an expression over N elements then costs N evaluations of N,
// quadratic. This measures it against the same list given as is (on a
// developer's machine: 1,000 elements 0.22 s as is, 2.9 s mapped; 2,000:
// 0.53 s and 14.7 s; 4,000: 1.5 s and 1 min 51 s).
func TestCostOfAStableListBuiltByAnExpression(t *testing.T) {
	if os.Getenv("LAMBDASAGA_MEASURE_STABLE_LIST") == "" {
		t.Skip("a measurement (about 20 s): set LAMBDASAGA_MEASURE_STABLE_LIST=1")
	}
	for _, n := range []int{1000, 2000} {
		var took [2]time.Duration
		for i, expr := range []string{"${input.items}", "${input.items.map(x, x * 2)}"} {
			r := newFrig(t, strings.Replace(wideYAML, "${input.items}", expr, 1), nil)
			items := make([]any, n)
			for i := range items {
				items[i] = int64(i)
			}
			began := time.Now()
			r.start("p", map[string]any{"items": items})
			r.drain()
			took[i] = time.Since(began)
			if st := r.get("p"); st.Status != durable.StatusSucceeded {
				t.Fatalf("%s: %s %+v: %s", expr, st.Status, st.Failure, firstLines(r.handleErrors(), 3))
			}
			t.Logf("%d elements, %s: %s", n, expr, took[i].Round(time.Millisecond))
		}
	}
}
