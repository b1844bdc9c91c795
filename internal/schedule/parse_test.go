package schedule_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/schedule"
)

var created = time.Date(2026, 12, 2, 13, 5, 27, 0, time.UTC)

// TestParseAcceptsAWSForms: the forms the AWS documents show parse, each
// as its kind.
func TestParseAcceptsAWSForms(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		expr string
		kind schedule.Kind
	}{
		{"cron(0 10 * * ? *)", schedule.KindCron},
		{"cron(15 12 * * ? *)", schedule.KindCron},
		{"cron(0 18 ? * MON-FRI *)", schedule.KindCron},
		{"cron(0 8 1 * ? *)", schedule.KindCron},
		{"cron(0/15 * * * ? *)", schedule.KindCron},
		{"cron(0/10 * ? * MON-FRI *)", schedule.KindCron},
		{"cron(0/5 8-17 ? * MON-FRI *)", schedule.KindCron},
		{"cron(0 9 ? * 2#1 *)", schedule.KindCron},
		{"cron(0 5 L * ? *)", schedule.KindCron},
		{"cron(0 12 15W * ? *)", schedule.KindCron},
		{"cron(0 12 ? * 6L *)", schedule.KindCron},
		{"cron(0 12 ? * L *)", schedule.KindCron},
		{"cron(0 0 ? JAN,feb,Mar mon-FRI 2026-2030/2)", schedule.KindCron},
		{"cron(*/7 1,2,3 */2 * ? *)", schedule.KindCron},
		{"cron(0 0 ? * FRI#3 2199)", schedule.KindCron},
		{"cron(0  0   1 * ? *)", schedule.KindCron},
		{"rate(1 minute)", schedule.KindRate},
		{"rate(1 minutes)", schedule.KindRate},
		{"rate(5 minutes)", schedule.KindRate},
		{"rate(1 hour)", schedule.KindRate},
		{"rate(12 hours)", schedule.KindRate},
		{"rate(7 days)", schedule.KindRate},
		{"at(2026-12-24T18:00:00)", schedule.KindAt},
	} {
		s, err := schedule.Parse(tt.expr, schedule.Options{Timezone: "Europe/Paris", Start: created})
		if err != nil {
			t.Errorf("%s: %v", tt.expr, err)
			continue
		}
		if s.Kind() != tt.kind || s.String() != tt.expr || s.Location().String() != "Europe/Paris" {
			t.Errorf("%s: kind %s, string %q, zone %s", tt.expr, s.Kind(), s, s.Location())
		}
	}
}

// TestParseErrorsNameTheFieldAndToken: every refusal is a *ParseError
// naming the part at fault and the text at fault.
func TestParseErrorsNameTheFieldAndToken(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		expr, tz     string
		field, token string
	}{
		{"cron(0 0 * * * *)", "", "day-of-week", "*"},
		{"cron(0 0 1 * MON *)", "", "day-of-week", "MON"},
		{"cron(0 0 ? * ? *)", "", "day-of-week", "?"},
		{"cron(0 0 * * ?)", "", "cron", "0 0 * * ?"},
		{"cron(0 0 * * ? * *)", "", "cron", "0 0 * * ? * *"},
		{"cron(60 0 * * ? *)", "", "minutes", "60"},
		{"cron(0 24 * * ? *)", "", "hours", "24"},
		{"cron(0 0 0 * ? *)", "", "day-of-month", "0"},
		{"cron(0 0 32 * ? *)", "", "day-of-month", "32"},
		{"cron(0 0 1 13 ? *)", "", "month", "13"},
		{"cron(0 0 1 JANUARY ? *)", "", "month", "JANUARY"},
		{"cron(0 0 ? * 8 *)", "", "day-of-week", "8"},
		{"cron(0 0 ? * 0 *)", "", "day-of-week", "0"},
		{"cron(0 0 ? * MONDAY *)", "", "day-of-week", "MONDAY"},
		{"cron(0 0 1 * ? 1969)", "", "year", "1969"},
		{"cron(0 0 1 * ? 2200)", "", "year", "2200"},
		{"cron(*/0 0 1 * ? *)", "", "minutes", "*/0"},
		{"cron(*/60 0 1 * ? *)", "", "minutes", "*/60"},
		{"cron(0 0/24 1 * ? *)", "", "hours", "0/24"},
		{"cron(5-1 0 1 * ? *)", "", "minutes", "5-1"},
		{"cron(0 0 ? * FRI-MON *)", "", "day-of-week", "FRI-MON"},
		{"cron(0 0 ? * */2 *)", "", "day-of-week", "*/2"},
		{"cron(0 0 ? * 3#1,6#3 *)", "", "day-of-week", "3#1,6#3"},
		{"cron(0 0 ? * 3#6 *)", "", "day-of-week", "3#6"},
		{"cron(0 0 ? * 9#1 *)", "", "day-of-week", "9#1"},
		{"cron(0 0 ? * MON,5L *)", "", "day-of-week", "5L"},
		{"cron(0 0 L,15 * ? *)", "", "day-of-month", "L"},
		{"cron(0 0 32W * ? *)", "", "day-of-month", "32W"},
		{"cron(0 0 1,15W * ? *)", "", "day-of-month", "15W"},
		{"cron(0 0 LW * ? *)", "", "day-of-month", "LW"},
		{"cron(? 0 1 * ? *)", "", "minutes", "?"},
		{"cron(0 0 1, * ? *)", "", "day-of-month", ""},
		{"cron(-1 0 1 * ? *)", "", "minutes", "-1"},
		{"cron(+1 0 1 * ? *)", "", "minutes", "+1"},
		{"rate(0 minutes)", "", "rate value", "0"},
		{"rate(-5 minutes)", "", "rate value", "-5"},
		{"rate(+5 minutes)", "", "rate value", "+5"},
		{"rate(1.5 hours)", "", "rate value", "1.5"},
		{"rate(99999999999 days)", "", "rate value", "99999999999"},
		{"rate(99999999999999999999 days)", "", "rate value", "99999999999999999999"},
		{"rate(10 seconds)", "", "rate unit", "seconds"},
		{"rate(5)", "", "rate", "5"},
		{"at(2026-12-24 18:00:00)", "", "at", "2026-12-24 18:00:00"},
		{"at(2026-12-24T18:00)", "", "at", "2026-12-24T18:00"},
		{"at(2026-02-30T18:00:00)", "", "at", "2026-02-30T18:00:00"},
		{"at(2026-03-08T02:30:00)", "America/New_York", "at", "2026-03-08T02:30:00"},
		{"every(5 minutes)", "", "expression", "every"},
		{"cron 0 0 * * ? *", "", "expression", "cron 0 0 * * ? *"},
		{"cron(0 0 1 * ? *)", "Mars/Olympus", "timezone", "Mars/Olympus"},
		{"cron(0 0 1 * ? *)", "Local", "timezone", "Local"},
	} {
		_, err := schedule.Parse(tt.expr, schedule.Options{Timezone: tt.tz, Start: created})
		var pe *schedule.ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%s: got %v, want a *ParseError", tt.expr, err)
			continue
		}
		if pe.Field != tt.field || pe.Token != tt.token || pe.Expr != tt.expr || pe.Reason == "" {
			t.Errorf("%s: field %q token %q (%v), want field %q token %q", tt.expr, pe.Field, pe.Token, err, tt.field, tt.token)
		}
	}
}

// TestRateNeedsAStart: a rate schedule fires from its start, so one
// without is refused.
func TestRateNeedsAStart(t *testing.T) {
	t.Parallel()
	_, err := schedule.Parse("rate(5 minutes)", schedule.Options{})
	var pe *schedule.ParseError
	if !errors.As(err, &pe) || pe.Field != "rate start" {
		t.Fatalf("got %v, want a rate start error", err)
	}
}
