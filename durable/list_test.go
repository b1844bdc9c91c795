package durable_test

import (
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

func TestListPositionOrders(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ordered := []string{
		durable.ListPosition(time.Unix(-5, 0), "z"), // before 1970: as 1970
		durable.ListPosition(t0, "a"),
		durable.ListPosition(t0, "b"),
		durable.ListPosition(t0.Add(time.Nanosecond), "a"),
		durable.ListPosition(t0.Add(time.Hour), "a"),
	}
	for i := 1; i < len(ordered); i++ {
		if ordered[i-1] >= ordered[i] {
			t.Errorf("%q sorts at or after %q", ordered[i-1], ordered[i])
		}
	}
	for _, p := range ordered {
		if !durable.ValidListPosition(p) {
			t.Errorf("%q: not a valid position", p)
		}
	}
	for _, bad := range []string{"", "1#a", "0000000000000000000x#a", "00000000000000000001#", "00000000000000000001-a", "00000000000000000001#a/b"} {
		if durable.ValidListPosition(bad) {
			t.Errorf("%q: taken as a position", bad)
		}
	}
}
