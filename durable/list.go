package durable

import (
	"strconv"
	"time"
)

// ListPosition is a saga's place in a listing's order: its StatusSince in
// Unix nanoseconds, as 20 digits, then "#" and its id. Positions compare as
// strings in the listing's order (a later time, then a greater id, is
// greater), so a store can index them and a cursor can be one. Times
// before 1970 take the position of 1970.
func ListPosition(since time.Time, sagaID string) string {
	ns := max(since.UnixNano(), 0)
	b := make([]byte, 0, 21+len(sagaID))
	digits := strconv.AppendInt(nil, ns, 10)
	for range 20 - len(digits) {
		b = append(b, '0')
	}
	b = append(b, digits...)
	b = append(b, '#')
	return string(append(b, sagaID...))
}

// ValidListPosition reports whether s is a ListPosition: what a store
// checks of a cursor it is given.
func ValidListPosition(s string) bool {
	if len(s) < 22 || s[20] != '#' {
		return false
	}
	for _, c := range []byte(s[:20]) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return ValidSagaID(s[21:])
}
