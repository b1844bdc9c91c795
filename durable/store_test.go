package durable_test

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
)

func TestForkKey(t *testing.T) {
	t.Parallel()
	if got := durable.ForkKey("order-7", "ship_all", 4); got != "order-7#ship_all#4" {
		t.Errorf("ForkKey = %q, want order-7#ship_all#4", got)
	}
	// The longest parent id and step id, at the largest visit: hashed, so
	// it fits; distinct forks stay distinct, and a hashed key is never a
	// plain one (it holds no '#').
	long := durable.ForkKey(strings.Repeat("p", 128), strings.Repeat("s", 64), 1<<64-1)
	other := durable.ForkKey(strings.Repeat("p", 128), strings.Repeat("s", 64), 1<<64-2)
	if len(long) != 41 || long[0] != 'f' || strings.Contains(long, "#") || long == other {
		t.Errorf("long keys %q and %q: want f and 40 hex digits each, distinct", long, other)
	}
	if long != durable.ForkKey(strings.Repeat("p", 128), strings.Repeat("s", 64), 1<<64-1) {
		t.Error("ForkKey is not a function of its arguments")
	}
	// At the bound the key is kept as is.
	edge := durable.ForkKey(strings.Repeat("p", 128-len("#s#1")), "s", 1)
	if len(edge) != durable.MaxForkKeyBytes || !strings.HasSuffix(edge, "#s#1") {
		t.Errorf("a key of %d bytes was changed to %q", durable.MaxForkKeyBytes, edge)
	}
}

func TestForkRecordLanes(t *testing.T) {
	t.Parallel()
	r := &durable.ForkRecord{Key: "k", Counts: []int{0, 3}, Stopped: []int{1, 4}, Failed: -1}
	for j, want := range map[int]int{-1: 0, 0: 0, 1: 3, 2: 0, 99: 0} {
		if got := r.Count(j); got != want {
			t.Errorf("Count(%d) = %d, want %d", j, got, want)
		}
	}
	for j, want := range map[int]bool{0: false, 1: true, 2: false, 4: true, 5: false} {
		if got := r.IsStopped(j); got != want {
			t.Errorf("IsStopped(%d) = %v, want %v", j, got, want)
		}
	}
}
