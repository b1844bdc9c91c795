package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
)

// The list filtered by status or name offers the verbs that act on its
// matches; posted, a bulk form confirms the count and acts on none; its
// confirmation acts on every match and says what it did.
func TestBulkCancelAsksWithTheCountThenActs(t *testing.T) {
	r := newRig(t)
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		r.start(t, "order", id)
	}
	r.start(t, "refund", "r-1")

	_, body := get(t, r.srv.URL, "/sagas")
	if strings.Contains(body, `id="bulk-`) {
		t.Errorf("the unfiltered list offers bulk actions:\n%s", body)
	}
	_, body = get(t, r.srv.URL, "/sagas?status=waiting&name=order")
	if !strings.Contains(body, `id="bulk-cancel"`) || strings.Contains(body, `id="bulk-resume"`) {
		t.Fatalf("the list of waiting orders: want a bulk cancel and no resume:\n%s", body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on the list:\n%s", body)
	}
	tok := m[1]
	filter := url.Values{"csrf": {tok}, "status": {"waiting"}, "name": {"order"}}

	if code, _ := post(t, r.srv.URL, "/bulk/cancel", url.Values{"status": {"waiting"}, "name": {"order"}}, nil); code != http.StatusForbidden {
		t.Errorf("without the token: %d, want 403", code)
	}
	if code, body := post(t, r.srv.URL, "/bulk/cancel", url.Values{"csrf": {tok}}, nil); code != http.StatusBadRequest || !strings.Contains(body, "too broad") {
		t.Errorf("without a filter: %d\n%s", code, body)
	}
	if code, body := post(t, r.srv.URL, "/bulk/resume", url.Values{"csrf": {tok}, "status": {"waiting"}}, nil); code != http.StatusBadRequest || !strings.Contains(body, "resume acts on sagas compensation_failed, not waiting") {
		t.Errorf("resume of waiting sagas: %d\n%s", code, body)
	}

	code, body := post(t, r.srv.URL, "/bulk/cancel", filter, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="bulk-count"`) || !strings.Contains(body, "<strong>3</strong> sagas") || !strings.Contains(body, `id="bulk-confirm"`) {
		t.Fatalf("the confirmation: %d\n%s", code, body)
	}
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		if !strings.Contains(body, `href="/sagas/`+id+`"`) {
			t.Errorf("the confirmation does not name %s", id)
		}
		if st := r.waitFor(t, id, durable.StatusWaiting); st.CancelRequested {
			t.Fatalf("asking to confirm cancelled %s", id)
		}
	}

	filter.Set("confirm", "yes")
	code, body = post(t, r.srv.URL, "/bulk/cancel", filter, nil)
	if code != http.StatusOK || !strings.Contains(body, `class="result ok" id="bulk-result">3 acted on, 0 skipped, 0 failed (3 matched`) {
		t.Fatalf("confirmed: %d\n%s", code, body)
	}
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		r.waitFor(t, id, durable.StatusCompensated)
	}
	r.waitFor(t, "r-1", durable.StatusCompensationFailed) // another name, another status: untouched

	code, body = post(t, r.srv.URL, "/bulk/cancel", filter, nil)
	if code != http.StatusOK || !strings.Contains(body, "0 acted on, 0 skipped, 0 failed (0 matched") {
		t.Errorf("again: %d\n%s", code, body)
	}
}
