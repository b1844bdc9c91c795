package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/console"
	"github.com/lambdasaga/lambdasaga/internal/engine"
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

// The list marks the sagas a pause of their name holds and names the
// actions paused; a saga's page says which pause holds its next step. A
// held saga is marked as its page says it: its retry would wait.
func TestListAndSagaPageShowThePauseThatHolds(t *testing.T) {
	r := newRig(t)
	r.start(t, "order", "o-1")
	r.start(t, "held", "h-1")
	r.waitFor(t, "h-1", durable.StatusHeld)
	r.start(t, "refund", "r-1")
	r.waitFor(t, "r-1", durable.StatusCompensationFailed)
	ctx := t.Context()
	if _, body := get(t, r.srv.URL, "/sagas"); strings.Contains(body, `class="paused"`) || strings.Contains(body, "paused-actions") {
		t.Fatalf("list before any pause marks one:\n%s", body)
	}
	for _, p := range []engine.PauseParams{
		{Kind: durable.PauseName, Target: "order"},
		{Kind: durable.PauseName, Target: "held"},
		{Kind: durable.PauseName, Target: "refund", Compensations: true},
		{Kind: durable.PauseAction, Target: "shipping.send", Until: time.Now().Add(time.Hour)},
	} {
		if err := r.src.Pause(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}
	_, body := get(t, r.srv.URL, "/sagas")
	marked := pausedRows(body)
	if len(marked) != 3 || !marked["o-1"] || !marked["h-1"] || marked["r-1"] {
		t.Errorf("rows marked paused: %v, want o-1 and h-1, not the compensated r-1\n%s", marked, body)
	}
	if !strings.Contains(body, `title="paused by name order: its next step is deferred"`) || !regexp.MustCompile(`id="paused-actions">Paused actions: shipping.send until [^.]+\.`).MatchString(body) {
		t.Errorf("list under pauses:\n%s", body)
	}
	if _, body := get(t, r.srv.URL, "/sagas/o-1"); !strings.Contains(body, `id="paused-by">by name order: its next step is deferred`) {
		t.Errorf("saga page under a pause of its name:\n%s", body)
	}
	if !strings.Contains(body, `title="paused by name held: a retry of it would wait"`) {
		t.Errorf("a held saga's mark:\n%s", body)
	}
	if _, body := get(t, r.srv.URL, "/sagas/h-1"); !strings.Contains(body, `id="paused-by">by name held: a retry of it would wait for the unpause`) {
		t.Errorf("a held saga's page under a pause of its name:\n%s", body)
	}
	if err := r.src.Unpause(ctx, durable.PauseName, "order"); err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, r.srv.URL, "/sagas/o-1"); strings.Contains(body, `id="paused-by"`) {
		t.Errorf("saga page after the unpause:\n%s", body)
	}
	if _, body := get(t, r.srv.URL, "/sagas"); pausedRows(body)["o-1"] || !pausedRows(body)["h-1"] || !strings.Contains(body, "paused-actions") {
		t.Errorf("list after the unpause of order:\n%s", body)
	}
}

// pausedRows reads a list page: whether each saga's row is marked paused.
func pausedRows(body string) map[string]bool {
	marked := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?s)<tr class="saga-row" data-id="([^"]+)">.*?</tr>`).FindAllStringSubmatch(body, -1) {
		marked[m[1]] = strings.Contains(m[0], `class="paused"`)
	}
	return marked
}

// failingPauses is the rig's source whose pauses cannot be read.
type failingPauses struct{ *console.Coordinator }

func (failingPauses) Pauses(context.Context) ([]durable.Pause, error) {
	return nil, errors.New("pauses throttled")
}

// A list whose pauses cannot be read still lists, unmarked, and says why.
func TestListStandsWhenThePausesCannotBeRead(t *testing.T) {
	r := newRig(t)
	r.start(t, "order", "o-1")
	con, err := console.New(console.Config{Source: failingPauses{r.src}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	code, body := get(t, srv.URL, "/sagas")
	if code != http.StatusOK || !strings.Contains(body, `data-id="o-1"`) || !strings.Contains(body, `id="pause-error">reading the pauses: pauses throttled: the sagas are listed without`) {
		t.Fatalf("list with the pauses unreadable: %d\n%s", code, body)
	}
}
