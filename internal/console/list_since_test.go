package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// A since filter too far back to count is refused, in days as in hours,
// rather than wrapped round to a time that matches nothing; the furthest
// that counts is still taken.
func TestListRefusesSincePastTheDurationRange(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for _, since := range []string{"99999999999999d", "106752d", "9223372036854775807d", "99999999999999h"} {
		code, body := get(t, r.srv.URL, "/sagas?since="+since)
		if code != http.StatusBadRequest {
			t.Errorf("since=%s: %d, want 400", since, code)
		}
		if !strings.Contains(body, since) {
			t.Errorf("since=%s: the refusal does not name it:\n%s", since, body)
		}
	}
	for _, since := range []string{"106751d", "2562047h", "0d"} {
		if code, body := get(t, r.srv.URL, "/sagas?since="+since); code != http.StatusOK {
			t.Errorf("since=%s: %d, want 200\n%s", since, code, body)
		}
	}
}
