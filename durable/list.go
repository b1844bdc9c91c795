package durable

import (
	"math"
	"strconv"
	"time"
)

// The times a position holds exactly: those of an int64 of Unix
// nanoseconds, from 1677 to 2262.
var (
	minPositionTime = time.Unix(0, math.MinInt64)
	maxPositionTime = time.Unix(0, math.MaxInt64)
)

// ListPosition is a saga's place in a listing's order: its StatusSince as
// 20 digits (Unix nanoseconds plus 2^63, so that times before 1970 sort
// before it), then "#" and its id. Positions compare as strings in the
// listing's order (a later time, then a greater id, is greater), so a store
// can index them and a cursor can be one. Times before 1678 or after 2262
// take the position of the nearest time that fits.
func ListPosition(since time.Time, sagaID string) string {
	var u uint64
	switch {
	case since.Before(minPositionTime):
		u = 0
	case since.After(maxPositionTime):
		u = math.MaxUint64
	default:
		u = uint64(since.UnixNano()) ^ 1<<63
	}
	b := make([]byte, 0, 21+len(sagaID))
	digits := strconv.AppendUint(nil, u, 10)
	for range 20 - len(digits) {
		b = append(b, '0')
	}
	b = append(b, digits...)
	b = append(b, '#')
	return string(append(b, sagaID...))
}

// PositionTime is the time a ListPosition holds; false when pos is not one.
func PositionTime(pos string) (time.Time, bool) {
	if len(pos) < 21 || pos[20] != '#' {
		return time.Time{}, false
	}
	for _, c := range []byte(pos[:20]) {
		if c < '0' || c > '9' {
			return time.Time{}, false
		}
	}
	u, err := strconv.ParseUint(pos[:20], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, int64(u^1<<63)).UTC(), true
}

// ValidListPosition reports whether s is a ListPosition: what a store
// checks of a cursor it is given.
func ValidListPosition(s string) bool {
	_, ok := PositionTime(s)
	return ok && ValidSagaID(s[21:])
}
