package durable_test

import (
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

func TestListPositionOrders(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	ordered := []string{
		durable.ListPosition(time.Time{}, "z"),                                 // before 1678: as 1678
		durable.ListPosition(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), "z"), // before 1970
		durable.ListPosition(time.Unix(-5, 0), "z"),
		durable.ListPosition(time.Unix(0, 0), "a"),
		durable.ListPosition(t0, "a"),
		durable.ListPosition(t0, "b"),
		durable.ListPosition(t0.Add(time.Nanosecond), "a"),
		durable.ListPosition(t0.Add(time.Hour), "a"),
		durable.ListPosition(time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC), "a"),
		durable.ListPosition(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), "a"), // after 2262: as 2262
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
	for _, at := range []time.Time{time.Date(1960, 5, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, 0).UTC(), t0.UTC()} {
		if got, ok := durable.PositionTime(durable.ListPosition(at, "a")); !ok || !got.Equal(at) {
			t.Errorf("%s comes back as %s %v", at, got, ok)
		}
	}
	for _, bad := range []string{"", "1#a", "0000000000000000000x#a", "00000000000000000001#", "00000000000000000001-a", "00000000000000000001#a/b", "99999999999999999999#a"} {
		if durable.ValidListPosition(bad) {
			t.Errorf("%q: taken as a position", bad)
		}
	}
}

// FuzzListPosition: every string a store may be handed as a cursor is
// either refused or a position that ListPosition writes, byte for byte.
func FuzzListPosition(f *testing.F) {
	for _, s := range []string{"", "00000000000000000000#a", "10987876036854775807#order-1", "18446744073709551615#z", "99999999999999999999#z", "0000000000000000000#a", "-0000000000000000001#a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !durable.ValidListPosition(s) {
			return
		}
		at, ok := durable.PositionTime(s)
		if !ok {
			t.Fatalf("%q is valid but holds no time", s)
		}
		if got := durable.ListPosition(at, s[21:]); got != s {
			t.Fatalf("%q is taken as a position but writes as %q", s, got)
		}
	})
}
