package schedule

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestCronNextMatchesAMinuteByMinuteWalk: for generated expressions,
// zones and times, Next gives exactly the instants a walk of every minute
// finds: those whose wall clock the expression matches, each wall clock
// once (its first instant). The walk reads the days' rules (L, W, L after
// a day, #) on its own, from the calendar.
func TestCronNextMatchesAMinuteByMinuteWalk(t *testing.T) {
	t.Parallel()
	cases := 150
	if testing.Short() {
		cases = 40
	}
	const window = 4 * 24 * time.Hour
	// Each zone with the days its clocks changed in 2026 (New York,
	// London, Lord Howe Island by 30 minutes, Santiago at midnight), and
	// two without changes.
	zones := map[string][]string{
		"America/New_York":    {"2026-03-08", "2026-11-01"},
		"Europe/London":       {"2026-03-29", "2026-10-25"},
		"Australia/Lord_Howe": {"2026-04-05", "2026-10-04"},
		"America/Santiago":    {"2026-04-05", "2026-09-06"},
		"Asia/Kathmandu":      {"2026-02-27"},
		"UTC":                 {"2026-12-30"},
	}
	names := slices.Sorted(maps.Keys(zones))
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	for i := range cases {
		// "*" often, so that many expressions fire around the changes.
		var dom, dow string
		if r.IntN(2) == 0 {
			dom, dow = pick("*", "*", "*", "1", "L", "15W", "1W", "31W", "1-10/3", "29,30,31", "*/5", "7"), "?"
		} else {
			dom, dow = "?", pick("*", "*", "*", "MON-FRI", "1", "6L", "3#2", "L", "SUN,SAT", "7#1", "2#5", "1L")
		}
		expr := fmt.Sprintf("cron(%s %s %s %s %s %s)",
			pick("*", "0", "0/15", "5-10", "*/7", "1,30,59", "30"),
			pick("*", "*", "0-3", "1-2", "2", "0/6", "23", "0,12"),
			dom,
			pick("*", "*", "*", "3", "MAR,NOV", "10-12", "*/2", "JAN-JUN"),
			dow,
			pick("*", "*", "2026", "2025-2027"))
		zone := pick(names...)
		s, err := Parse(expr, Options{Timezone: zone})
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		// From a day before a change, or any day of 2026.
		day, _ := time.Parse(time.DateOnly, pick(zones[zone]...))
		day = day.AddDate(0, 0, -1)
		if r.IntN(4) == 0 {
			day = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, r.IntN(365))
		}
		after := day.Add(time.Duration(r.IntN(36*60)) * time.Minute).Add(time.Duration(r.IntN(60)) * time.Second)
		want := walk(s.cron, s.loc, after, after.Add(window))
		got := s.Next(after, len(want)+1)
		got = slices.DeleteFunc(got, func(v time.Time) bool { return !v.Before(after.Add(window)) })
		if !slices.EqualFunc(got, want, time.Time.Equal) {
			d := 0
			for d < len(got) && d < len(want) && got[d].Equal(want[d]) {
				d++
			}
			t.Fatalf("case %d: %s in %s after %s: %d times, want %d; first difference at %d: got %v, want %v",
				i, expr, zone, after.Format(time.RFC3339), len(got), len(want), d, at(got, d), at(want, d))
		}
	}
}

// walk lists the instants in (after, end) whose wall clock in loc c
// matches, each wall clock at its first instant only.
func walk(c *cron, loc *time.Location, after, end time.Time) []time.Time {
	var out []time.Time
	seen := map[time.Time]bool{} // wall clocks shown so far, as UTC
	// From a few hours before after: a wall clock first shown before it
	// has fired before it.
	for v := after.Truncate(time.Minute).Add(-3 * time.Hour); v.Before(end); v = v.Add(time.Minute) {
		l := v.In(loc)
		wall := time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC)
		first := !seen[wall]
		seen[wall] = true
		if !first || !v.After(after) || !wallMatches(c, l) {
			continue
		}
		out = append(out, v)
	}
	return out
}

// wallMatches reads the expression's rules on a wall clock, the day's
// from the calendar rather than from next's helpers.
func wallMatches(c *cron, l time.Time) bool {
	y, mo, d := l.Date()
	if !c.minutes.has(l.Minute()) || !c.hours.has(l.Hour()) || !c.months.has(int(mo)-1) || !c.years.has(y-1970) {
		return false
	}
	date := time.Date(y, mo, d, 12, 0, 0, 0, time.UTC)
	lastOfMonth := date.AddDate(0, 0, 1).Month() != mo
	wd := int(date.Weekday()) + 1
	if c.domAny {
		switch {
		case c.dowNth > 0:
			// The k-th such day: k-1 of them before it in the month.
			before := 0
			for back := date.AddDate(0, 0, -7); back.Month() == mo; back = back.AddDate(0, 0, -7) {
				before++
			}
			return wd == c.dowNthDay && before == c.dowNth-1
		case c.dowLast > 0:
			return wd == c.dowLast && date.AddDate(0, 0, 7).Month() != mo
		}
		return c.dows.has(wd - 1)
	}
	switch {
	case c.domLast:
		return lastOfMonth
	case c.domNearest > 0:
		// The weekday of the month closest to day n (the later on a tie,
		// which cannot happen: a tie needs n on a weekend between two
		// weekdays, n-1 and n+1, and a weekend has two days).
		target := time.Date(y, mo, c.domNearest, 12, 0, 0, 0, time.UTC)
		if target.Month() != mo {
			return false
		}
		best, bestDist := 0, 99
		for cand := time.Date(y, mo, 1, 12, 0, 0, 0, time.UTC); cand.Month() == mo; cand = cand.AddDate(0, 0, 1) {
			if wdc := cand.Weekday(); wdc == time.Saturday || wdc == time.Sunday {
				continue
			}
			dist := cand.Day() - c.domNearest
			if dist < 0 {
				dist = -dist
			}
			if dist < bestDist {
				best, bestDist = cand.Day(), dist
			}
		}
		return d == best
	}
	return c.doms.has(d - 1)
}

// at is ts[i] in UTC, or "none".
func at(ts []time.Time, i int) string {
	if i >= len(ts) {
		return "none"
	}
	return ts[i].UTC().Format(time.RFC3339)
}
