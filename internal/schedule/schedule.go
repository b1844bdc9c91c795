package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the zones are known where the system has no zoneinfo (a Lambda image, a container)
)

// Kind is the type of a schedule expression.
type Kind string

// The kinds of schedule expression.
const (
	KindCron Kind = "cron"
	KindRate Kind = "rate"
	KindAt   Kind = "at"
)

// Kinds lists every Kind.
func Kinds() []Kind { return []Kind{KindCron, KindRate, KindAt} }

// Options are what a schedule has besides its expression.
type Options struct {
	// Timezone is the IANA name of the zone the expression is read in
	// (ScheduleExpressionTimezone): "Europe/Paris". Empty is UTC.
	Timezone string
	// Start is when a rate schedule starts: its StartDate, or the moment
	// it was created. It fires then, and every period after. Kept to the
	// second, as the scheduled time is. A rate expression needs it; the
	// others ignore it.
	Start time.Time
}

// Schedule is a parsed schedule expression in its time zone. It is
// immutable and safe for concurrent use.
type Schedule struct {
	expr  string
	kind  Kind
	loc   *time.Location
	cron  *cron
	every time.Duration // rate
	start time.Time     // rate
	at    time.Time     // at
}

// ParseError is an expression, or a time zone, that EventBridge Scheduler
// would refuse: Field names the part at fault (a cron field such as
// "day-of-week", "rate value", "at", "timezone", or "expression" for the
// whole), Token the text at fault, Reason why.
type ParseError struct {
	Expr, Field, Token, Reason string
}

// Error says what is wrong: the expression, the field, the token, why.
func (e *ParseError) Error() string {
	return fmt.Sprintf("%s: %s %q: %s", e.Expr, e.Field, e.Token, e.Reason)
}

// LastYear is the last year a cron schedule can fire in: the year field's
// largest value.
const LastYear = 2199

// Parse reads a schedule expression: cron(...), rate(...) or at(...) (the
// package doc has the rules). Every error is a *ParseError.
func Parse(expr string, opts Options) (*Schedule, error) {
	s := &Schedule{expr: expr}
	loc, err := Zone(opts.Timezone)
	if err != nil {
		return nil, &ParseError{Expr: expr, Field: "timezone", Token: opts.Timezone, Reason: err.Error()}
	}
	s.loc = loc
	open := strings.IndexByte(expr, '(')
	if open < 0 || !strings.HasSuffix(expr, ")") {
		return nil, &ParseError{Expr: expr, Field: "expression", Token: expr, Reason: "not cron(...), rate(...) or at(...)"}
	}
	inner := expr[open+1 : len(expr)-1]
	switch Kind(expr[:open]) {
	case KindCron:
		s.kind = KindCron
		s.cron, err = parseCron(expr, inner)
	case KindRate:
		s.kind = KindRate
		s.every, err = parseRate(expr, inner)
		if err == nil && opts.Start.IsZero() {
			return nil, &ParseError{Expr: expr, Field: "rate start", Token: "", Reason: "a rate schedule fires from its start (StartDate, or when it was created): give one"}
		}
		s.start = opts.Start.Truncate(time.Second)
	case KindAt:
		s.kind = KindAt
		s.at, err = parseAt(expr, inner, loc)
	default:
		return nil, &ParseError{Expr: expr, Field: "expression", Token: expr[:open], Reason: "not cron, rate or at"}
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Zone loads the time zone a schedule names (ScheduleExpressionTimezone):
// an IANA name, UTC when empty. "Local" is refused: it would read the
// expression in this machine's zone, not AWS's.
func Zone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("not an IANA time zone name (such as UTC or Europe/Paris)")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("not an IANA time zone name (such as UTC or Europe/Paris)")
	}
	return loc, nil
}

// rateUnits are the units rate(...) takes, as the CreateSchedule API
// Reference lists them.
var rateUnits = map[string]time.Duration{
	"minute": time.Minute, "minutes": time.Minute,
	"hour": time.Hour, "hours": time.Hour,
	"day": 24 * time.Hour, "days": 24 * time.Hour,
}

func parseRate(expr, inner string) (time.Duration, error) {
	f := strings.Fields(inner)
	if len(f) != 2 {
		return 0, &ParseError{Expr: expr, Field: "rate", Token: inner, Reason: "want rate(VALUE UNIT), such as rate(5 minutes)"}
	}
	unit, ok := rateUnits[f[1]]
	if !ok {
		return 0, &ParseError{Expr: expr, Field: "rate unit", Token: f[1], Reason: "not minute, minutes, hour, hours, day or days"}
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 1 || f[0][0] == '+' {
		if errors.Is(err, strconv.ErrRange) {
			return 0, &ParseError{Expr: expr, Field: "rate value", Token: f[0], Reason: "too long a period"}
		}
		return 0, &ParseError{Expr: expr, Field: "rate value", Token: f[0], Reason: "not a positive whole number"}
	}
	if n > int64(maxPeriod/unit) {
		return 0, &ParseError{Expr: expr, Field: "rate value", Token: f[0], Reason: "too long a period (over 100 years)"}
	}
	return time.Duration(n) * unit, nil
}

// maxPeriod bounds a rate's period: no schedule waits longer between
// firings than the years a cron schedule covers, and the arithmetic on
// it cannot overflow.
const maxPeriod = 100 * 365 * 24 * time.Hour

// atLayout is the time of at(...): yyyy-mm-ddThh:mm:ss.
const atLayout = "2006-01-02T15:04:05"

func parseAt(expr, inner string, loc *time.Location) (time.Time, error) {
	wall, err := time.Parse(atLayout, inner)
	if err != nil || len(inner) != len(atLayout) {
		return time.Time{}, &ParseError{Expr: expr, Field: "at", Token: inner, Reason: "not a time yyyy-mm-ddThh:mm:ss"}
	}
	t, ok := resolve(wall, loc)
	if !ok {
		return time.Time{}, &ParseError{Expr: expr, Field: "at", Token: inner, Reason: fmt.Sprintf("does not exist in %s: the clocks skip it (daylight saving time)", loc)}
	}
	return t, nil
}

// resolve gives the instant at which the clocks of loc show wall (a
// time whose fields are read as a wall clock, its zone ignored): the
// first of the two when they show it twice, none when they skip it.
func resolve(wall time.Time, loc *time.Location) (time.Time, bool) {
	y, mo, d := wall.Date()
	h, mi, sec := wall.Clock()
	base := time.Date(y, mo, d, h, mi, sec, 0, time.UTC)
	// The instants that show wall are base minus an offset loc uses near
	// it; a zone's offsets lie within 14 hours of UTC, so those in force
	// a day before and after base cover every transition around it.
	var best time.Time
	found := false
	for _, probe := range []time.Time{base.Add(-26 * time.Hour), base, base.Add(26 * time.Hour), time.Date(y, mo, d, h, mi, sec, 0, loc)} {
		_, off := probe.In(loc).Zone()
		cand := base.Add(-time.Duration(off) * time.Second)
		l := cand.In(loc)
		ly, lmo, ld := l.Date()
		lh, lmi, lsec := l.Clock()
		if ly != y || lmo != mo || ld != d || lh != h || lmi != mi || lsec != sec {
			continue
		}
		if !found || cand.Before(best) {
			best, found = cand, true
		}
	}
	return best, found
}

// String returns the expression as given.
func (s *Schedule) String() string { return s.expr }

// Kind returns the expression's kind.
func (s *Schedule) Kind() Kind { return s.kind }

// Location returns the time zone the expression is read in.
func (s *Schedule) Location() *time.Location { return s.loc }

// Every returns a rate schedule's period; 0 for the other kinds.
func (s *Schedule) Every() time.Duration { return s.every }

// Next returns the first n times the schedule fires strictly after
// after, in increasing order and in the schedule's time zone; fewer when
// it fires fewer times (an at schedule, a cron schedule past its last
// year or whose days never come, such as February 30).
func (s *Schedule) Next(after time.Time, n int) []time.Time {
	if n <= 0 {
		return nil
	}
	var out []time.Time
	switch s.kind {
	case KindAt:
		if s.at.After(after) {
			out = append(out, s.at.In(s.loc))
		}
	case KindRate:
		// The k-th firing is start + k*every; the first after after has
		// k = floor((after-start)/every) + 1, or 0 when after is before
		// start. In whole seconds: start has none, every is minutes.
		k := int64(0)
		if !after.Before(s.start) {
			k = (after.Unix()-s.start.Unix())/int64(s.every/time.Second) + 1
		}
		every := int64(s.every / time.Second)
		for ; len(out) < n; k++ {
			out = append(out, time.Unix(s.start.Unix()+k*every, 0).In(s.loc))
		}
	case KindCron:
		out = s.cron.next(after, s.loc, n)
	}
	return out
}
