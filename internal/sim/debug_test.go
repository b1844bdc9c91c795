package sim

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDebugSaga prints a saga's history: SIM_DEBUG=seed:sagas:id;
// SIM_OBJECTS=1 runs with an object store (Config.Objects), SIM_EDGE=R
// with that EdgeRate.
func TestDebugSaga(t *testing.T) {
	spec := os.Getenv("SIM_DEBUG")
	if spec == "" {
		t.Skip("SIM_DEBUG not set")
	}
	var seed uint64
	var n int
	var id string
	fmt.Sscanf(strings.ReplaceAll(spec, ":", " "), "%d %d %s", &seed, &n, &id)
	maxExamples = 500
	debugTrace = os.Getenv("SIM_TRACE")
	debugHook = func(w *world) {
		type kv struct {
			id string
			n  int
		}
		var top []kv
		for id, n := range w.handled {
			top = append(top, kv{id, n})
		}
		slices.SortFunc(top, func(a, b kv) int { return b.n - a.n })
		for _, e := range top[:min(5, len(top))] {
			fmt.Printf("busiest: %s %d messages, last error %q\n", e.id, e.n, w.lastErr[e.id])
		}
		for sid, ws := range w.committed {
			if sid != id && !strings.HasPrefix(sid, id+".") {
				continue
			}
			st, _ := w.coord.Get(context.Background(), sid)
			fmt.Printf("=== %s final %s v%d parent=%+v undoing=%v cursors=%+v lastErr=%q\n", sid, st.Status, st.Version, st.Parent, st.Undoing, st.Cursors, w.lastErr[sid])
			for _, wr := range ws {
				fmt.Printf("  v%d seq%d %s kept=%v at=%s wake=%s:", wr.version, wr.seq, wr.status, wr.kept, wr.at.Format("15:04:05.000"), wr.wakeAt.Format("15:04:05"))
				for _, ev := range wr.log.events {
					fmt.Printf(" [%s %s %s comp=%v]", ev.Step, ev.Kind, ev.Outcome, ev.Compensation)
				}
				for _, c := range wr.log.calls {
					fmt.Printf(" call(%s ok=%v)", c.IdempotencyKey, c.ok)
				}
				fmt.Println()
			}
		}
	}
	var edge float64
	fmt.Sscanf(os.Getenv("SIM_EDGE"), "%g", &edge)
	rep, err := Run(Config{Seed: seed, Sagas: n, Poison: 3, Objects: os.Getenv("SIM_OBJECTS") != "", EdgeRate: edge})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(rep)
}
