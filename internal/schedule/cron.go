package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// bits is a set of a field's values, value v at index v - field.min.
type bits [4]uint64

func (b *bits) set(i int)      { b[i>>6] |= 1 << (i & 63) }
func (b *bits) has(i int) bool { return b[i>>6]>>(i&63)&1 == 1 }

// field is one of the six fields of cron(...).
type field struct {
	name     string
	min, max int
	names    []string // names[i] stands for min+i
	step     bool     // takes '/'
}

var (
	monthNames   = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
	weekdayNames = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}

	minutesField = field{name: "minutes", min: 0, max: 59, step: true}
	hoursField   = field{name: "hours", min: 0, max: 23, step: true}
	domField     = field{name: "day-of-month", min: 1, max: 31, step: true}
	monthField   = field{name: "month", min: 1, max: 12, names: monthNames, step: true}
	dowField     = field{name: "day-of-week", min: 1, max: 7, names: weekdayNames}
	yearField    = field{name: "year", min: 1970, max: LastYear, step: true}
)

// cron is a parsed cron(...) expression.
type cron struct {
	minutes, hours, months, years bits
	// domAny: day-of-month is '?', day-of-week chooses the days.
	domAny bool
	// day-of-month: a set, L (domLast) or nW (domNearest = n).
	doms       bits
	domLast    bool
	domNearest int
	// day-of-week: a set (L is Saturday), nL (dowLast = n) or n#k
	// (dowNth = k, dowNthDay = n).
	dows              bits
	dowLast           int
	dowNth, dowNthDay int
}

func parseCron(expr, inner string) (*cron, error) {
	f := strings.Fields(inner)
	if len(f) != 6 {
		return nil, &ParseError{Expr: expr, Field: "cron", Token: inner,
			Reason: fmt.Sprintf("want 6 fields (minutes hours day-of-month month day-of-week year), got %d", len(f))}
	}
	errAt := func(fl field, tok, format string, args ...any) error {
		return &ParseError{Expr: expr, Field: fl.name, Token: tok, Reason: fmt.Sprintf(format, args...)}
	}
	dom, dow := f[2], f[4]
	switch {
	case dom == "?" && dow == "?":
		return nil, errAt(dowField, dow, "day-of-month is ? too: one of the two chooses the days, the other is ?")
	case dom != "?" && dow != "?":
		return nil, errAt(dowField, dow, "day-of-month is given (%s), so day-of-week must be ?: one of the two is ?", dom)
	}
	c := &cron{}
	var err error
	for _, x := range []struct {
		f   field
		tok string
		b   *bits
	}{{minutesField, f[0], &c.minutes}, {hoursField, f[1], &c.hours}, {monthField, f[3], &c.months}, {yearField, f[5], &c.years}} {
		if *x.b, err = parseList(x.f, x.tok, errAt); err != nil {
			return nil, err
		}
	}
	switch {
	case dom == "?":
		c.domAny = true
	case dom == "L":
		c.domLast = true
	case strings.HasSuffix(dom, "W") && !strings.Contains(dom, ","):
		n, ok := number(strings.TrimSuffix(dom, "W"))
		if !ok || n < 1 || n > 31 {
			return nil, errAt(domField, dom, "W follows a day from 1 to 31 (15W: the weekday nearest the 15th)")
		}
		c.domNearest = n
	default:
		if c.doms, err = parseList(domField, dom, errAt); err != nil {
			return nil, err
		}
	}
	switch {
	case dow == "?":
	case dow == "L":
		c.dows.set(7 - dowField.min) // the week's last day, Saturday
	case strings.Contains(dow, "#") && strings.Contains(dow, ","):
		return nil, errAt(dowField, dow, "with #, day-of-week holds one expression (3#1,6#3 is two)")
	case strings.Contains(dow, "#"):
		day, nth, _ := strings.Cut(dow, "#")
		d, ok := value(dowField, day)
		if !ok {
			return nil, errAt(dowField, dow, "# follows a day from 1 to 7 or SUN to SAT, and stands alone (3#1,6#3 is two expressions)")
		}
		k, ok := number(nth)
		if !ok || k < 1 || k > 5 {
			return nil, errAt(dowField, dow, "# is followed by the week of the month, 1 to 5 (3#2: the second Tuesday)")
		}
		c.dowNthDay, c.dowNth = d, k
	case strings.HasSuffix(dow, "L") && !strings.Contains(dow, ","):
		d, ok := value(dowField, strings.TrimSuffix(dow, "L"))
		if !ok {
			return nil, errAt(dowField, dow, "L follows a day from 1 to 7 or SUN to SAT (6L: the month's last Friday), or stands alone")
		}
		c.dowLast = d
	default:
		if c.dows, err = parseList(dowField, dow, errAt); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// parseList reads a field of ',' separated elements: *, a value, a
// range a-b, each with an optional /increment.
func parseList(f field, tok string, errAt func(field, string, string, ...any) error) (bits, error) {
	var b bits
	for _, el := range strings.Split(tok, ",") {
		body, stepText, hasStep := strings.Cut(el, "/")
		step := 1
		if hasStep {
			if !f.step {
				return b, errAt(f, el, "/ is not allowed in %s", f.name)
			}
			n, ok := number(stepText)
			if !ok || n < 1 || n > f.max {
				return b, errAt(f, el, "the increment is a whole number from 1 to %d", f.max)
			}
			step = n
		}
		var lo, hi int
		switch {
		case body == "*":
			lo, hi = f.min, f.max
		case body == "?":
			return b, errAt(f, el, "? is for day-of-month or day-of-week, alone in its field")
		case special(f, body):
			return b, errAt(f, el, "L, W and # stand alone in their field")
		default:
			from, to, isRange := strings.Cut(body, "-")
			var ok bool
			if lo, ok = value(f, from); !ok {
				return b, errAt(f, el, "%s", f.valueRule())
			}
			hi = lo
			switch {
			case isRange:
				if hi, ok = value(f, to); !ok {
					return b, errAt(f, el, "%s", f.valueRule())
				}
				if hi < lo {
					return b, errAt(f, el, "the range runs backwards")
				}
			case hasStep:
				hi = f.max
			}
		}
		for v := lo; v <= hi; v += step {
			b.set(v - f.min)
		}
	}
	return b, nil
}

// special reports whether el is one of the forms that must stand alone:
// L, nW in day-of-month; L, nL, n#k in day-of-week.
func special(f field, el string) bool {
	switch f.name {
	case domField.name:
		_, ok := number(strings.TrimSuffix(el, "W"))
		return el == "L" || strings.HasSuffix(el, "W") && ok
	case dowField.name:
		_, ok := value(f, strings.TrimSuffix(el, "L"))
		return el == "L" || strings.HasSuffix(el, "L") && ok || strings.Contains(el, "#")
	}
	return false
}

func (f field) valueRule() string {
	if f.names != nil {
		return fmt.Sprintf("not a number from %d to %d nor a name from %s to %s", f.min, f.max, f.names[0], f.names[len(f.names)-1])
	}
	return fmt.Sprintf("not a number from %d to %d", f.min, f.max)
}

// value reads one value of f: a number in its range, or a name.
func value(f field, s string) (int, bool) {
	if n, ok := number(s); ok {
		return n, n >= f.min && n <= f.max
	}
	for i, name := range f.names {
		if strings.EqualFold(s, name) {
			return f.min + i, true
		}
	}
	return 0, false
}

// number reads a whole number of at most 4 digits, without a sign.
func number(s string) (int, bool) {
	if s == "" || len(s) > 4 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// next lists the first n times strictly after after. It walks the wall
// clock of loc forward from after's date, and turns each matching minute
// into an instant (resolve): one the clocks skip never fires, one they
// show twice fires at its first. That map keeps the order of wall times,
// so no minute before after's wall clock can come after it.
func (c *cron) next(after time.Time, loc *time.Location, n int) []time.Time {
	var out []time.Time
	y, mo, d := after.In(loc).Date()
	if y < yearField.min {
		y, mo, d = yearField.min, time.January, 1
	}
	for ; y <= yearField.max; y, mo, d = y+1, time.January, 1 {
		if !c.years.has(y - yearField.min) {
			continue
		}
		for ; mo <= time.December; mo, d = mo+1, 1 {
			if !c.months.has(int(mo) - monthField.min) {
				continue
			}
			days := daysIn(y, mo)
			for ; d <= days; d++ {
				if !c.matchDay(y, mo, d, days) {
					continue
				}
				for h := 0; h <= hoursField.max; h++ {
					if !c.hours.has(h) {
						continue
					}
					for m := 0; m <= minutesField.max; m++ {
						if !c.minutes.has(m) {
							continue
						}
						t, ok := resolve(time.Date(y, mo, d, h, m, 0, 0, time.UTC), loc)
						if !ok || !t.After(after) {
							continue
						}
						if out = append(out, t.In(loc)); len(out) == n {
							return out
						}
					}
				}
			}
		}
	}
	return out
}

// matchDay reports whether the day d of month mo of year y (which has
// days days) is one of the expression's days.
func (c *cron) matchDay(y int, mo time.Month, d, days int) bool {
	if c.domAny {
		wd := weekday(y, mo, d)
		switch {
		case c.dowNth > 0:
			return wd == c.dowNthDay && (d-1)/7+1 == c.dowNth
		case c.dowLast > 0:
			return wd == c.dowLast && d+7 > days
		}
		return c.dows.has(wd - dowField.min)
	}
	switch {
	case c.domLast:
		return d == days
	case c.domNearest > 0:
		return d == nearestWeekday(y, mo, c.domNearest, days)
	}
	return c.doms.has(d - domField.min)
}

// nearestWeekday is the weekday (Monday to Friday) nearest day n of the
// month, never in another month: a Saturday the 1st gives Monday the
// 3rd, a Sunday the last day gives Friday. 0 when the month has no day n.
func nearestWeekday(y int, mo time.Month, n, days int) int {
	if n > days {
		return 0
	}
	switch weekday(y, mo, n) {
	case 7: // Saturday
		if n == 1 {
			return 3
		}
		return n - 1
	case 1: // Sunday
		if n == days {
			return n - 2
		}
		return n + 1
	}
	return n
}

// weekday numbers a day as day-of-week does: 1 is Sunday, 7 Saturday.
func weekday(y int, mo time.Month, d int) int {
	return int(time.Date(y, mo, d, 0, 0, 0, 0, time.UTC).Weekday()) + 1
}

func daysIn(y int, mo time.Month) int {
	return time.Date(y, mo+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
