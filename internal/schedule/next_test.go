package schedule_test

import (
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/schedule"
)

// utc reads times written as RFC 3339, for the tables.
func utc(t *testing.T, ss ...string) []time.Time {
	t.Helper()
	out := make([]time.Time, len(ss))
	for i, s := range ss {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = v
	}
	return out
}

func next(t *testing.T, expr, tz string, start, after string, n int) []time.Time {
	t.Helper()
	opts := schedule.Options{Timezone: tz}
	if start != "" {
		opts.Start = utc(t, start)[0]
	}
	s, err := schedule.Parse(expr, opts)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return s.Next(utc(t, after)[0], n)
}

func sameInstants(a, b []time.Time) bool {
	return slices.EqualFunc(a, b, time.Time.Equal)
}

// TestNextCron: the documented wildcards fire where the EventBridge User
// Guide says (2026: March 1st is a Sunday).
func TestNextCron(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		expr, tz, after string
		want            []string
	}{
		{"cron(0 10 * * ? *)", "", "2026-03-01T10:00:00Z", []string{"2026-03-02T10:00:00Z", "2026-03-03T10:00:00Z"}},
		{"cron(0/15 * * * ? *)", "", "2026-03-01T10:07:00Z", []string{"2026-03-01T10:15:00Z", "2026-03-01T10:30:00Z", "2026-03-01T10:45:00Z", "2026-03-01T11:00:00Z"}},
		{"cron(1/10 * * * ? *)", "", "2026-03-01T10:00:00Z", []string{"2026-03-01T10:01:00Z", "2026-03-01T10:11:00Z", "2026-03-01T10:21:00Z"}},
		{"cron(0 18 ? * MON-FRI *)", "", "2026-03-06T18:00:00Z", []string{"2026-03-09T18:00:00Z", "2026-03-10T18:00:00Z"}},
		{"cron(0 8 1 * ? *)", "", "2026-03-01T08:00:00Z", []string{"2026-04-01T08:00:00Z", "2026-05-01T08:00:00Z"}},
		// L: the last day of the month, leap years included.
		{"cron(0 5 L * ? *)", "", "2028-01-31T06:00:00Z", []string{"2028-02-29T05:00:00Z", "2028-03-31T05:00:00Z", "2028-04-30T05:00:00Z"}},
		// 3W: the weekday nearest the 3rd; 1W on a Saturday is Monday the
		// 3rd, never the last day of the month before; 31W on a Sunday is
		// Friday the 29th; a month without a 31st has no 31W.
		{"cron(0 0 3W * ? *)", "", "2026-09-30T00:00:00Z", []string{"2026-10-02T00:00:00Z", "2026-11-03T00:00:00Z", "2026-12-03T00:00:00Z"}},
		{"cron(0 0 1W * ? *)", "", "2026-07-31T00:00:00Z", []string{"2026-08-03T00:00:00Z", "2026-09-01T00:00:00Z"}},
		{"cron(0 0 31W * ? *)", "", "2026-05-01T00:00:00Z", []string{"2026-05-29T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z"}},
		// 3#2: the second Tuesday; 6L: the last Friday; L: Saturdays.
		{"cron(0 12 ? * 3#2 *)", "", "2026-03-01T00:00:00Z", []string{"2026-03-10T12:00:00Z", "2026-04-14T12:00:00Z"}},
		{"cron(0 12 ? * TUE#5 *)", "", "2026-03-01T00:00:00Z", []string{"2026-03-31T12:00:00Z", "2026-06-30T12:00:00Z"}},
		{"cron(0 12 ? * 6L *)", "", "2026-03-01T00:00:00Z", []string{"2026-03-27T12:00:00Z", "2026-04-24T12:00:00Z"}},
		{"cron(0 12 ? * L *)", "", "2026-03-01T00:00:00Z", []string{"2026-03-07T12:00:00Z", "2026-03-14T12:00:00Z"}},
		// The year field ends the schedule.
		{"cron(0 0 1 1 ? 2026-2027)", "", "2026-01-01T00:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"cron(0 0 31 12 ? *)", "", "2199-12-31T00:00:00Z", nil},
		{"cron(0 0 30 2 ? *)", "", "2026-01-01T00:00:00Z", nil},
		// In a zone: Europe/Paris is UTC+1 in winter, UTC+2 in summer.
		{"cron(0 9 ? * MON *)", "Europe/Paris", "2026-03-20T00:00:00Z", []string{"2026-03-23T08:00:00Z", "2026-03-30T07:00:00Z"}},
		// Asia/Kathmandu is UTC+5:45.
		{"cron(0 0 * * ? *)", "Asia/Kathmandu", "2026-03-01T00:00:00Z", []string{"2026-03-01T18:15:00Z"}},
	} {
		got := next(t, tt.expr, tt.tz, "", tt.after, 5)
		if len(tt.want) < 5 && len(got) > len(tt.want) && tt.want != nil {
			got = got[:len(tt.want)]
		}
		if want := utc(t, tt.want...); !sameInstants(got, want) {
			t.Errorf("%s in %q after %s:\n got %v\nwant %v", tt.expr, tt.tz, tt.after, got, want)
		}
	}
}

// TestNextAcrossDaylightSavingTime: a time the clocks skip does not fire
// that day; a time they show twice fires once, at the first. New York
// moved its clocks from 02:00 to 03:00 on 2026-03-08 and from 02:00 back
// to 01:00 on 2026-11-01; Lord Howe Island moves them by 30 minutes.
func TestNextAcrossDaylightSavingTime(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, expr, tz, after string
		want                  []string
	}{
		{"skipped", "cron(30 2 * * ? *)", "America/New_York", "2026-03-07T08:00:00Z",
			[]string{"2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"skipped hour", "cron(0/30 * * * ? *)", "America/New_York", "2026-03-08T06:15:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"}}, // 01:30 EST, then 03:00 EDT
		{"repeated, once at the first", "cron(30 1 * * ? *)", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"repeated hour", "cron(0/20 1-2 * * ? *)", "America/New_York", "2026-11-01T05:00:00Z",
			[]string{"2026-11-01T05:20:00Z", "2026-11-01T05:40:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:20:00Z"}},
		// after inside the second 01:00-02:00: what the clock shows then
		// has fired already.
		{"after inside the repeat", "cron(0/20 1-2 * * ? *)", "America/New_York", "2026-11-01T06:10:00Z",
			[]string{"2026-11-01T07:00:00Z"}},
		{"half-hour shift", "cron(15 2 * * ? *)", "Australia/Lord_Howe", "2026-10-03T00:00:00Z",
			[]string{"2026-10-04T15:15:00Z"}}, // 2026-10-04 02:15 is skipped; the 5th's is 02:15 +11
	} {
		got := next(t, tt.expr, tt.tz, "", tt.after, len(tt.want))
		if want := utc(t, tt.want...); !sameInstants(got, want) {
			t.Errorf("%s: %s in %s after %s:\n got %v\nwant %v", tt.name, tt.expr, tt.tz, tt.after, got, want)
		}
	}
}

// TestNextRate: a rate schedule fires at its start and every period
// after, to the second of its start; a day is 24 hours even when the
// clocks change.
func TestNextRate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		expr, tz, start, after string
		want                   []string
	}{
		{"rate(5 minutes)", "", "2026-12-02T13:05:27Z", "2026-12-02T13:00:00Z", []string{"2026-12-02T13:05:27Z", "2026-12-02T13:10:27Z"}},
		{"rate(5 minutes)", "", "2026-12-02T13:05:27Z", "2026-12-02T13:05:27Z", []string{"2026-12-02T13:10:27Z", "2026-12-02T13:15:27Z"}},
		{"rate(5 minutes)", "", "2026-12-02T13:05:27Z", "2026-12-02T13:12:00Z", []string{"2026-12-02T13:15:27Z"}},
		{"rate(2 hours)", "", "2026-12-02T13:05:27Z", "2026-12-03T13:05:26Z", []string{"2026-12-03T13:05:27Z", "2026-12-03T15:05:27Z"}},
		{"rate(1 day)", "America/New_York", "2026-03-07T17:00:00Z", "2026-03-07T17:00:00Z", []string{"2026-03-08T17:00:00Z", "2026-03-09T17:00:00Z"}},
		{"rate(1 day)", "", "1970-01-01T00:00:00Z", "2199-06-01T00:00:00Z", []string{"2199-06-02T00:00:00Z"}},
	} {
		got := next(t, tt.expr, tt.tz, tt.start, tt.after, len(tt.want))
		if want := utc(t, tt.want...); !sameInstants(got, want) {
			t.Errorf("%s from %s after %s:\n got %v\nwant %v", tt.expr, tt.start, tt.after, got, want)
		}
	}
	s, err := schedule.Parse("rate(5 minutes)", schedule.Options{Start: time.Date(2026, 12, 2, 13, 5, 27, 999_999_999, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(time.Time{}, 1); len(got) != 1 || got[0].Nanosecond() != 0 || s.Every() != 5*time.Minute {
		t.Errorf("a start is kept to the second: %v, every %s", got, s.Every())
	}
}

// TestNextAt: an at schedule fires once, at its wall-clock time in its
// zone (the first when the clocks show it twice).
func TestNextAt(t *testing.T) {
	t.Parallel()
	if got, want := next(t, "at(2026-12-24T18:00:00)", "Europe/Paris", "", "2026-12-01T00:00:00Z", 3), utc(t, "2026-12-24T17:00:00Z"); !sameInstants(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, want := next(t, "at(2026-11-01T01:30:00)", "America/New_York", "", "2026-11-01T00:00:00Z", 3), utc(t, "2026-11-01T05:30:00Z"); !sameInstants(got, want) {
		t.Errorf("repeated: got %v, want %v", got, want)
	}
	if got := next(t, "at(2026-12-24T18:00:00)", "", "", "2026-12-24T18:00:00Z", 3); len(got) != 0 {
		t.Errorf("after its time: %v", got)
	}
}

// TestNextIsInTheSchedulesZone: the times come in the schedule's zone.
func TestNextIsInTheSchedulesZone(t *testing.T) {
	t.Parallel()
	s, err := schedule.Parse("cron(0 9 * * ? *)", schedule.Options{Timezone: "Asia/Tokyo"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range s.Next(created, 3) {
		if v.Location().String() != "Asia/Tokyo" || v.Hour() != 9 {
			t.Errorf("%v", v)
		}
	}
	if got := s.Next(created, 0); got != nil {
		t.Errorf("n 0: %v", got)
	}
}
