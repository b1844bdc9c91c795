package durable_test

import (
	"strconv"
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

// FuzzListPosition: every string a store may be handed as a cursor is
// either refused or a position that ListPosition writes, byte for byte.
func FuzzListPosition(f *testing.F) {
	for _, s := range []string{"", "00000000000000000000#a", "01764504000000000000#order-1", "99999999999999999999#z", "0000000000000000000#a", "-0000000000000000001#a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !durable.ValidListPosition(s) {
			return
		}
		ns, err := strconv.ParseInt(s[:20], 10, 64)
		if err != nil {
			return // 20 digits past int64: valid as a bound, never written
		}
		if got := durable.ListPosition(time.Unix(0, ns), s[21:]); got != s {
			t.Fatalf("%q is taken as a position but writes as %q", s, got)
		}
	})
}
