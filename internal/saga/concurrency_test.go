package saga_test

import (
	"sync"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
)

// One Plan serves many sagas at once (run with -race).
func TestPlanConcurrentUse(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	var wg sync.WaitGroup
	statuses := make([]durable.Status, 16)
	for i := range statuses {
		wg.Go(func() {
			act := failing()
			if i%2 == 1 {
				act = failing("charge")
			}
			statuses[i] = drive(t, p, orderIn(float64(i)*200), act).st.Status
		})
	}
	wg.Wait()
	for i, s := range statuses {
		want := durable.StatusSucceeded
		if i%2 == 1 {
			want = durable.StatusCompensated
		}
		if s != want {
			t.Errorf("saga %d: %s, want %s", i, s, want)
		}
	}
}
