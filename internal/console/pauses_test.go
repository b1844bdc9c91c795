package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The pauses page lists the pauses; pausing and unpausing ask first, and
// need the console's token.
func TestPausesPageAsksThenPausesAndUnpauses(t *testing.T) {
	r := newRig(t)
	code, body := get(t, r.srv.URL, "/pauses")
	m := csrfField.FindStringSubmatch(body)
	if code != http.StatusOK || !strings.Contains(body, `id="none"`) || m == nil {
		t.Fatalf("pauses page: %d\n%s", code, body)
	}
	tok := m[1]
	form := url.Values{"csrf": {tok}, "kind": {"action"}, "target": {"stock.reserve"}, "until": {"2h"}, "compensations": {"yes"}}
	if code, body := post(t, r.srv.URL, "/pauses/pause", url.Values{"kind": {"action"}, "target": {"stock.reserve"}}, nil); code != http.StatusForbidden {
		t.Fatalf("pause without the token: %d\n%s", code, body)
	}
	code, body = post(t, r.srv.URL, "/pauses/pause", form, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="confirm"`) || !strings.Contains(body, "every call of action stock.reserve") || !strings.Contains(body, "compensations are held too") {
		t.Fatalf("pause without confirm: %d\n%s", code, body)
	}
	if _, body := get(t, r.srv.URL, "/pauses"); !strings.Contains(body, `id="none"`) {
		t.Fatalf("the confirmation paused:\n%s", body)
	}
	form.Set("confirm", "yes")
	code, body = post(t, r.srv.URL, "/pauses/pause", form, nil)
	if code != http.StatusOK || !strings.Contains(body, `class="result ok" id="result">paused action stock.reserve`) ||
		!strings.Contains(body, `data-kind="action" data-target="stock.reserve"`) || !strings.Contains(body, "<td>held</td>") {
		t.Fatalf("pause: %d\n%s", code, body)
	}
	if ps, err := r.src.Pauses(t.Context()); err != nil || len(ps) != 1 || ps[0].Until.IsZero() || !ps[0].Compensations {
		t.Fatalf("stored: %+v %v", ps, err)
	}
	unpause := url.Values{"csrf": {tok}, "kind": {"action"}, "target": {"stock.reserve"}, "confirm": {"yes"}}
	code, body = post(t, r.srv.URL, "/pauses/unpause", unpause, nil)
	if code != http.StatusOK || !strings.Contains(body, "unpaused action stock.reserve") || !strings.Contains(body, `id="none"`) {
		t.Fatalf("unpause: %d\n%s", code, body)
	}
	code, body = post(t, r.srv.URL, "/pauses/unpause", unpause, nil)
	if code != http.StatusNotFound || !strings.Contains(body, "unpause failed") {
		t.Fatalf("unpause of nothing: %d\n%s", code, body)
	}
	if code, _ := post(t, r.srv.URL, "/pauses/pause", url.Values{"csrf": {tok}, "kind": {"saga"}, "target": {"x"}}, nil); code != http.StatusBadRequest {
		t.Fatalf("a pause of an unknown kind: %d", code)
	}
}
