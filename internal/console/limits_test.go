package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The Limits page lists the limits; setting and unsetting one asks for
// confirmation first, and carries the console's token.
func TestLimitsPageSetsAndUnsetsConfirmed(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	code, body := get(t, r.srv.URL, "/limits")
	if code != http.StatusOK || !strings.Contains(body, "No action has a limit.") {
		t.Fatalf("limits page: %d\n%s", code, body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token on the limits page")
	}
	tok := m[1]
	set := url.Values{"csrf": {tok}, "action": {"payments.charge"}, "rate": {"50/s"}, "concurrency": {"5"}}
	if code, _ := post(t, r.srv.URL, "/limits/set", url.Values{"action": {"payments.charge"}, "rate": {"50"}}, nil); code != http.StatusForbidden {
		t.Fatalf("a set without the token: %d", code)
	}
	code, body = post(t, r.srv.URL, "/limits/set", set, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="confirm-limit"`) || !strings.Contains(body, "50 calls/s (5 per 100ms window), 5 at once") || !strings.Contains(body, "No action has a limit.") {
		t.Fatalf("set, unconfirmed: %d\n%s", code, body)
	}
	set.Set("confirm", "yes")
	code, body = post(t, r.srv.URL, "/limits/set", set, nil)
	if code != http.StatusOK || !strings.Contains(body, `data-action="payments.charge"`) || !strings.Contains(body, "limit of payments.charge set") {
		t.Fatalf("set, confirmed: %d\n%s", code, body)
	}
	code, body = post(t, r.srv.URL, "/limits/set", url.Values{"csrf": {tok}, "action": {"x"}, "rate": {"5000"}, "confirm": {"yes"}}, nil)
	if code != http.StatusBadRequest || !strings.Contains(body, "over the 500/s") {
		t.Fatalf("a rate over one key's: %d\n%s", code, body)
	}
	unset := url.Values{"csrf": {tok}, "action": {"payments.charge"}}
	if code, body = post(t, r.srv.URL, "/limits/unset", unset, nil); code != http.StatusOK || !strings.Contains(body, "its calls run unlimited") {
		t.Fatalf("unset, unconfirmed: %d\n%s", code, body)
	}
	unset.Set("confirm", "yes")
	if code, body = post(t, r.srv.URL, "/limits/unset", unset, nil); code != http.StatusOK || !strings.Contains(body, "No action has a limit.") {
		t.Fatalf("unset, confirmed: %d\n%s", code, body)
	}
	if code, body = post(t, r.srv.URL, "/limits/unset", unset, nil); code != http.StatusNotFound || !strings.Contains(body, "unset limit of payments.charge failed") {
		t.Fatalf("unset again: %d\n%s", code, body)
	}
}
