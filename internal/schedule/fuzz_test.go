package schedule_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/schedule"
)

// FuzzParse: Parse never panics; what it refuses is a *ParseError; what
// it accepts gives times strictly increasing, each after the time asked,
// at most as many as asked, and parses again the same.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"cron(0 10 * * ? *)", "cron(0/15 * * * ? *)", "cron(0 18 ? * MON-FRI *)", "cron(0 5 L * ? *)",
		"cron(0 12 15W * ? *)", "cron(0 12 ? * 6L *)", "cron(0 9 ? * 2#1 2026-2030)", "cron(30 2 * * ? *)",
		"cron(0/20 1-2 * * ? *)", "cron(0 0 30 2 ? *)", "cron(0 0 31W * ? 2199)", "rate(5 minutes)", "rate(1 day)",
		"at(2026-11-01T01:30:00)", "cron(5-1 0 * * ? *)", "cron(0 0 ? * 3#1,6#3 *)", "cron(,,, * * * * *)",
	} {
		f.Add(seed, uint8(1), int64(1_772_900_000))
	}
	zones := []string{"UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kathmandu", "Pacific/Apia", ""}
	start := time.Date(2026, 3, 7, 13, 5, 27, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expr string, zone uint8, afterUnix int64) {
		opts := schedule.Options{Timezone: zones[int(zone)%len(zones)], Start: start}
		s, err := schedule.Parse(expr, opts)
		if err != nil {
			var pe *schedule.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("%q: %v is not a *ParseError", expr, err)
			}
			return
		}
		// Within the years a schedule can fire in, and a little around.
		after := time.Unix(afterUnix%(8_000_000_000)+(-86_400*365), 0)
		const n = 12
		times := s.Next(after, n)
		if len(times) > n {
			t.Fatalf("%q: %d times, asked %d", expr, len(times), n)
		}
		prev := after
		for _, v := range times {
			if !v.After(prev) {
				t.Fatalf("%q in %s after %s: %v does not come after %v (%v)", expr, opts.Timezone, after, v, prev, times)
			}
			prev = v
		}
		again, err := schedule.Parse(s.String(), opts)
		if err != nil || again.Kind() != s.Kind() {
			t.Fatalf("%q parses once, not again: %v", expr, err)
		}
	})
}
