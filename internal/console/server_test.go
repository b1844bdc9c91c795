package console_test

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func get(t *testing.T, base, path string) (int, string) {
	t.Helper()
	res, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

func post(t *testing.T, base, path string, form url.Values, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

// token reads the CSRF token from a saga's page.
func (r *rig) token(t *testing.T, id string) string {
	t.Helper()
	_, body := get(t, r.srv.URL, "/sagas/"+id)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("saga %s: no CSRF token on its page:\n%s", id, body)
	}
	return m[1]
}

// stepStatus is the data-status the graph gives a step on a page.
func stepStatus(body, step string) string {
	m := regexp.MustCompile(`id="step-` + regexp.QuoteMeta(step) + `" data-status="([a-z_]*)"`).FindStringSubmatch(body)
	if m == nil {
		return "(not drawn)"
	}
	return m[1]
}

func TestListPage(t *testing.T) {
	r := newRig(t)
	r.start(t, "order", "o-1")
	r.start(t, "refund", "r-1")
	r.start(t, "order", "o-2")

	code, body := get(t, r.srv.URL, "/sagas")
	if code != http.StatusOK {
		t.Fatalf("GET /sagas: %d\n%s", code, body)
	}
	// Newest first: o-2 entered waiting last.
	i2, ir, i1 := strings.Index(body, `data-id="o-2"`), strings.Index(body, `data-id="r-1"`), strings.Index(body, `data-id="o-1"`)
	if i2 < 0 || ir < 0 || i1 < 0 || i2 > ir || ir > i1 {
		t.Errorf("list: want o-2, r-1, o-1 in that order, got positions %d %d %d:\n%s", i2, ir, i1, body)
	}
	for _, tc := range []struct {
		query     string
		want, not []string
	}{
		{"status=waiting", []string{"o-1", "o-2"}, []string{"r-1"}},
		{"status=compensation_failed", []string{"r-1"}, []string{"o-1", "o-2"}},
		{"name=refund", []string{"r-1"}, []string{"o-1", "o-2"}},
		{"name=order&status=waiting", []string{"o-1", "o-2"}, []string{"r-1"}},
		{"since=1h", []string{"o-1", "o-2", "r-1"}, nil},
		{"since=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), nil, []string{"o-1", "o-2", "r-1"}},
	} {
		code, body := get(t, r.srv.URL, "/sagas?"+tc.query)
		if code != http.StatusOK {
			t.Errorf("%s: %d", tc.query, code)
		}
		for _, id := range tc.want {
			if !strings.Contains(body, `data-id="`+id+`"`) {
				t.Errorf("%s: %s missing", tc.query, id)
			}
		}
		for _, id := range tc.not {
			if strings.Contains(body, `data-id="`+id+`"`) {
				t.Errorf("%s: %s listed", tc.query, id)
			}
		}
	}
	for _, q := range []string{"status=lost", "since=yesterday", "cursor=nope"} {
		if code, _ := get(t, r.srv.URL, "/sagas?"+q); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}
}

// A page of one saga links to the next, which lists the following one:
// every saga once, newest first.
func TestListPages(t *testing.T) {
	r := newRig(t)
	con, err := console.New(console.Config{Source: r.src, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	defer srv.Close()
	r.start(t, "order", "o-1")
	r.start(t, "order", "o-2")
	r.start(t, "refund", "r-1")
	next := regexp.MustCompile(`id="next-page" href="([^"]+)"`)
	row := regexp.MustCompile(`data-id="([^"]+)"`)
	var seen []string
	path := "/sagas?name=order"
	for range 5 {
		code, body := get(t, srv.URL, path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
		for _, m := range row.FindAllStringSubmatch(body, -1) {
			seen = append(seen, m[1])
		}
		m := next.FindStringSubmatch(body)
		if m == nil {
			break
		}
		path = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	if fmt.Sprint(seen) != "[o-2 o-1]" {
		t.Errorf("pages of name=order: %v, want [o-2 o-1]", seen)
	}
}

func TestSagaPage(t *testing.T) {
	r := newRig(t)
	r.start(t, "order", "o-1")
	code, body := get(t, r.srv.URL, "/sagas/o-1")
	if code != http.StatusOK {
		t.Fatalf("GET /sagas/o-1: %d\n%s", code, body)
	}
	for step, want := range map[string]string{"reserve": "done", "approval": "waiting", "ship": ""} {
		if got := stepStatus(body, step); got != want {
			t.Errorf("step %s: %q, want %q", step, got, want)
		}
	}
	for _, want := range []string{`id="saga-status">waiting<`, "await of step approval: signal approved", `&#34;order_id&#34;: &#34;o-1&#34;`,
		`class="outcome o-completed">completed<`, `class="outcome o-waiting">waiting<`, `id="cancel"`, `id="signal-name" required value="approved"`} {
		if !strings.Contains(body, want) {
			t.Errorf("saga page: %q missing", want)
		}
	}
	if strings.Contains(body, `id="resume"`) {
		t.Error("saga page: a waiting saga offers resume")
	}
	r.start(t, "refund", "r-1")
	_, body = get(t, r.srv.URL, "/sagas/r-1")
	for step, want := range map[string]string{"book": "compensation_failed", "pay": "failed"} {
		if got := stepStatus(body, step); got != want {
			t.Errorf("refund step %s: %q, want %q", step, got, want)
		}
	}
	for _, want := range []string{`id="parked">step book: LedgerDown: the ledger refuses unbookings<`, `id="resume"`, "CardExpired: the card expired"} {
		if !strings.Contains(body, want) {
			t.Errorf("parked saga page: %q missing", want)
		}
	}
	if code, _ := get(t, r.srv.URL, "/sagas/nobody"); code != http.StatusNotFound {
		t.Errorf("unknown saga: %d, want 404", code)
	}
	if code, _ := get(t, r.srv.URL, "/sagas/-bad"); code != http.StatusBadRequest {
		t.Errorf("bad id: %d, want 400", code)
	}
	if code, _ := get(t, r.srv.URL, "/"); code != http.StatusOK { // redirected to /sagas
		t.Errorf("GET /: %d", code)
	}
}

// Every action first shows a confirmation, which changes nothing; only
// its confirm button acts.
func TestCancelAsksThenCompensates(t *testing.T) {
	r := newRig(t)
	r.start(t, "order", "o-1")
	tok := r.token(t, "o-1")
	code, body := post(t, r.srv.URL, "/sagas/o-1/cancel", url.Values{"csrf": {tok}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="confirm"`) || !strings.Contains(body, "compensates every step it completed") {
		t.Fatalf("cancel without confirm: %d\n%s", code, body)
	}
	if st := r.waitFor(t, "o-1", durable.StatusWaiting); st.CancelRequested {
		t.Fatal("the confirmation cancelled")
	}
	code, body = post(t, r.srv.URL, "/sagas/o-1/cancel", url.Values{"csrf": {tok}, "confirm": {"yes"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `class="result ok" id="result">Cancelled`) {
		t.Fatalf("cancel: %d\n%s", code, body)
	}
	r.waitFor(t, "o-1", durable.StatusCompensated)
	_, body = get(t, r.srv.URL, "/sagas/o-1")
	if got := stepStatus(body, "reserve"); got != "compensated" {
		t.Errorf("reserve after the cancel: %q, want compensated", got)
	}
	// Resuming a saga that is not parked is refused, and said so.
	code, body = post(t, r.srv.URL, "/sagas/o-1/resume", url.Values{"csrf": {tok}, "confirm": {"yes"}}, nil)
	if code != http.StatusConflict || !strings.Contains(body, `class="result error" id="result">resume failed`) {
		t.Errorf("resume a compensated saga: %d\n%s", code, body)
	}
}

func TestResumeContinuesParked(t *testing.T) {
	r := newRig(t)
	r.start(t, "refund", "r-1")
	tok := r.token(t, "r-1")
	r.fixed.Store(true)
	code, body := post(t, r.srv.URL, "/sagas/r-1/resume", url.Values{"csrf": {tok}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="confirm"`) {
		t.Fatalf("resume without confirm: %d\n%s", code, body)
	}
	code, body = post(t, r.srv.URL, "/sagas/r-1/resume", url.Values{"csrf": {tok}, "confirm": {"yes"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="result">Resumed`) {
		t.Fatalf("resume: %d\n%s", code, body)
	}
	r.waitFor(t, "r-1", durable.StatusCompensated)
	if _, body := get(t, r.srv.URL, "/sagas/r-1"); stepStatus(body, "book") != "compensated" {
		t.Errorf("book after the resume: %q, want compensated", stepStatus(body, "book"))
	}
}

// A held saga offers retry, compensate and cancel, each confirmed; a
// retry runs the step again and the saga goes on.
func TestRetryAndCompensateHeld(t *testing.T) {
	r := newRig(t)
	r.start(t, "held", "h-1")
	r.start(t, "held", "h-2")
	tok := r.token(t, "h-1")
	_, body := get(t, r.srv.URL, "/sagas/h-1")
	for _, want := range []string{`id="retry"`, `id="compensate"`, `id="cancel"`} {
		if !strings.Contains(body, want) {
			t.Errorf("held saga's page has no %s", want)
		}
	}
	code, body := post(t, r.srv.URL, "/sagas/h-1/retry", url.Values{"csrf": {tok}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="confirm"`) || !strings.Contains(body, "same idempotency key") {
		t.Fatalf("retry without confirm: %d\n%s", code, body)
	}
	if st := r.waitFor(t, "h-1", durable.StatusHeld); st.Failure == nil {
		t.Fatal("the confirmation retried")
	}
	r.fixed.Store(true)
	code, body = post(t, r.srv.URL, "/sagas/h-1/retry", url.Values{"csrf": {tok}, "confirm": {"yes"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="result">Retried`) {
		t.Fatalf("retry: %d\n%s", code, body)
	}
	r.waitFor(t, "h-1", durable.StatusSucceeded)
	code, body = post(t, r.srv.URL, "/sagas/h-2/compensate", url.Values{"csrf": {tok}, "confirm": {"yes"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="result">Compensating`) {
		t.Fatalf("compensate: %d\n%s", code, body)
	}
	r.waitFor(t, "h-2", durable.StatusCompensated)
	if _, body := get(t, r.srv.URL, "/sagas/h-2"); stepStatus(body, "book") != "compensated" {
		t.Errorf("book after compensate: %q, want compensated", stepStatus(body, "book"))
	}
	// Neither verb applies to a saga that is not held.
	code, body = post(t, r.srv.URL, "/sagas/h-1/compensate", url.Values{"csrf": {tok}, "confirm": {"yes"}}, nil)
	if code != http.StatusConflict || !strings.Contains(body, "compensate failed") {
		t.Errorf("compensate a succeeded saga: %d\n%s", code, body)
	}
}

func TestSignal(t *testing.T) {
	r := newRig(t)
	r.start(t, "order", "o-1")
	tok := r.token(t, "o-1")
	code, body := post(t, r.srv.URL, "/sagas/o-1/signal", url.Values{"csrf": {tok}, "name": {"approved"}, "payload": {`{"by": "maria"}`}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `name="payload" value="{&#34;by&#34;: &#34;maria&#34;}"`) {
		t.Fatalf("signal without confirm: %d\n%s", code, body)
	}
	code, body = post(t, r.srv.URL, "/sagas/o-1/signal", url.Values{"csrf": {tok}, "confirm": {"yes"}, "name": {"approved"}, "payload": {`{"by": "maria"}`}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="result">Signal approved: applied.`) {
		t.Fatalf("signal: %d\n%s", code, body)
	}
	st := r.waitFor(t, "o-1", durable.StatusSucceeded)
	if d, _ := st.Vars["decision"].(map[string]any); d["by"] != "maria" {
		t.Errorf("the await's out: %v", st.Vars)
	}
	for _, tc := range []struct {
		form url.Values
		code int
		want string
	}{
		{url.Values{"name": {"approved"}, "payload": {"{nope"}}, http.StatusBadRequest, "not valid JSON"},
		{url.Values{"payload": {"{}"}}, http.StatusBadRequest, "give the signal&#39;s name"},
		{url.Values{"name": {"approved"}, "confirm": {"yes"}}, http.StatusConflict, "signal failed"}, // the saga is final
	} {
		tc.form.Set("csrf", tok)
		code, body := post(t, r.srv.URL, "/sagas/o-1/signal", tc.form, nil)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("signal %v: %d, want %d and %q:\n%s", tc.form, code, tc.code, tc.want, body)
		}
	}
}

func TestCallback(t *testing.T) {
	r := newRig(t)
	r.start(t, "webhook", "w-1")
	r.start(t, "webhook", "w-2")
	_, body := get(t, r.srv.URL, "/sagas/w-1")
	m := regexp.MustCompile(`id="callback-token" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil || stepStatus(body, "charge") != "waiting" {
		t.Fatalf("a saga waiting on its callback: no token, or charge not waiting:\n%s", body)
	}
	tok := r.token(t, "w-1")
	code, body := post(t, r.srv.URL, "/sagas/w-1/callback", url.Values{"csrf": {tok}, "confirm": {"yes"}, "token": {m[1]}, "output": {`{"paid": 12}`}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="result">Callback: applied.`) {
		t.Fatalf("complete: %d\n%s", code, body)
	}
	if st := r.waitFor(t, "w-1", durable.StatusSucceeded); fmt.Sprint(st.Vars["payment"]) != "map[paid:12]" {
		t.Errorf("the callback's output: %v", st.Vars)
	}
	_, body = get(t, r.srv.URL, "/sagas/w-2")
	tok2 := regexp.MustCompile(`id="callback-token" value="([^"]+)"`).FindStringSubmatch(body)[1]
	code, body = post(t, r.srv.URL, "/sagas/w-2/callback", url.Values{"csrf": {tok}, "token": {tok2}, "error_type": {"Declined"}, "message": {"no funds"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `Fail the callback&#39;s attempt with the error &#34;Declined&#34;`) {
		t.Fatalf("fail, unconfirmed: %d\n%s", code, body)
	}
	code, body = post(t, r.srv.URL, "/sagas/w-2/callback", url.Values{"csrf": {tok}, "confirm": {"yes"}, "token": {tok2}, "error_type": {"Declined"}, "message": {"no funds"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, `id="result">Callback: applied.`) {
		t.Fatalf("fail: %d\n%s", code, body)
	}
	code, body = post(t, r.srv.URL, "/sagas/w-2/callback", url.Values{"csrf": {tok}, "confirm": {"yes"}, "token": {"forged"}, "output": {"{}"}}, nil)
	if code != http.StatusBadRequest || !strings.Contains(body, "callback failed") {
		t.Errorf("forged token: %d\n%s", code, body)
	}
	code, _ = post(t, r.srv.URL, "/sagas/w-2/callback", url.Values{"csrf": {tok}, "token": {tok2}}, nil)
	if code != http.StatusBadRequest {
		t.Errorf("neither output nor error: %d, want 400", code)
	}
}

// A POST without the token, or from another origin or site, is refused
// and changes nothing; so is any request naming a host that is not
// loopback.
func TestRefusesForeignRequests(t *testing.T) {
	r := newRig(t)
	r.start(t, "order", "o-1")
	tok := r.token(t, "o-1")
	yes := func(csrf string) url.Values { return url.Values{"csrf": {csrf}, "confirm": {"yes"}} }
	for _, tc := range []struct {
		name   string
		form   url.Values
		header map[string]string
	}{
		{"no token", url.Values{"confirm": {"yes"}}, nil},
		{"a wrong token", yes(strings.Repeat("0", 64)), nil},
		{"another origin", yes(tok), map[string]string{"Origin": "http://evil.example"}},
		{"another site", yes(tok), map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"an opaque origin", yes(tok), map[string]string{"Origin": "null"}},
	} {
		code, body := post(t, r.srv.URL, "/sagas/o-1/cancel", tc.form, tc.header)
		if code != http.StatusForbidden || !strings.Contains(body, "refused") {
			t.Errorf("%s: %d, want 403:\n%s", tc.name, code, body)
		}
	}
	// The same origin, and a form sent from the console's own page, pass.
	u, _ := url.Parse(r.srv.URL)
	code, _ := post(t, r.srv.URL, "/sagas/o-1/signal", url.Values{"csrf": {tok}, "name": {"other"}},
		map[string]string{"Origin": "http://" + u.Host, "Sec-Fetch-Site": "same-origin"})
	if code != http.StatusOK {
		t.Errorf("same origin: %d, want 200", code)
	}
	if st := r.waitFor(t, "o-1", durable.StatusWaiting); st.CancelRequested {
		t.Error("a refused cancel cancelled")
	}
	req := httptest.NewRequest(http.MethodGet, "/sagas", nil)
	req.Host = "evil.example:8080"
	rec := httptest.NewRecorder()
	r.con.ServeHTTP(rec, req)
	if rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("Host evil.example: %d, want 421", rec.Code)
	}
	for _, host := range []string{"localhost:8080", "127.0.0.1", "[::1]:9"} {
		req.Host = host
		rec := httptest.NewRecorder()
		r.con.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("Host %s: %d, want 200", host, rec.Code)
		}
	}
	if code, _ := post(t, r.srv.URL, "/sagas/o-1/reset", yes(tok), nil); code != http.StatusBadRequest {
		t.Errorf("unknown action: %d, want 400", code)
	}
}

func TestAssetsAndHeaders(t *testing.T) {
	r := newRig(t)
	res, err := http.Get(r.srv.URL + "/static/console.css")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), ".st-done") {
		t.Errorf("console.css: %d", res.StatusCode)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'none'") {
		t.Errorf("Content-Security-Policy: %q", csp)
	}
	// Under no-referrer a browser posts the console's own forms with
	// "Origin: null", which the CSRF guard refuses.
	if rp := res.Header.Get("Referrer-Policy"); rp != "same-origin" {
		t.Errorf("Referrer-Policy: %q, want same-origin", rp)
	}
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		remote bool
		ok     bool
	}{
		{"127.0.0.1:8080", false, true},
		{"localhost:0", false, true},
		{"[::1]:8080", false, true},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"10.1.2.3:8080", false, false},
		{"0.0.0.0:8080", true, true},
		{"nope", false, false},
	} {
		err := console.CheckAddr(tc.addr, tc.remote)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q, %v): %v", tc.addr, tc.remote, err)
		}
	}
}

// failing is a Source whose every call fails with err.
type failing struct{ err error }

func (f failing) List(context.Context, *durable.SagaListParams) (*durable.SagaListResult, error) {
	return nil, f.err
}
func (f failing) Get(context.Context, string) (*saga.State, error)         { return nil, f.err }
func (f failing) History(context.Context, string) ([]console.Entry, error) { return nil, f.err }
func (f failing) Plan(context.Context, string) (*saga.Plan, error)         { return nil, f.err }
func (f failing) Cancel(context.Context, string) (*saga.State, error)      { return nil, f.err }
func (f failing) Resume(context.Context, string) (*saga.State, error)      { return nil, f.err }
func (f failing) Retry(context.Context, string) (*saga.State, error)       { return nil, f.err }
func (f failing) Compensate(context.Context, string) (*saga.State, error)  { return nil, f.err }
func (f failing) Signal(context.Context, *engine.SignalParams) (*engine.Delivered, error) {
	return nil, f.err
}
func (f failing) CompleteCallback(context.Context, string, any) (*engine.Delivered, error) {
	return nil, f.err
}
func (f failing) FailCallback(context.Context, string, string, string) (*engine.Delivered, error) {
	return nil, f.err
}

// A backend's errors reach the operator with a status that says whose
// fault it is, and the page says what failed.
func TestSourceErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{errors.New("table unreachable"), http.StatusInternalServerError},
		{fmt.Errorf("saga x: %w", durable.ErrNotFound), http.StatusNotFound},
		{context.DeadlineExceeded, http.StatusGatewayTimeout},
	} {
		con, err := console.New(console.Config{Source: failing{tc.err}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(con)
		for _, path := range []string{"/sagas", "/sagas/x"} {
			code, body := get(t, srv.URL, path)
			if code != tc.code || !strings.Contains(body, `id="error"`) {
				t.Errorf("%v: GET %s: %d, want %d", tc.err, path, code, tc.code)
			}
		}
		srv.Close()
	}
	if _, err := console.New(console.Config{}); err == nil {
		t.Error("New without a Source: no error")
	}
}

// A saga whose input holds a secret card, echoed into its vars and named
// by its failure: the page shows neither, only the mask; the action got
// the card.
func TestSagaPageHidesSecrets(t *testing.T) {
	r := newRig(t)
	const card = "4111111111111111"
	ctx := context.Background()
	if _, err := r.rt.Coordinator.Start(ctx, &engine.StartParams{Plan: r.plans["card"], SagaID: "c-1", Input: map[string]any{"order_id": "c-1", "card": card}}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "c-1", durable.StatusCompensated)
	code, body := get(t, r.srv.URL, "/sagas/c-1")
	if code != http.StatusOK {
		t.Fatalf("GET /sagas/c-1: %d\n%s", code, body)
	}
	if strings.Contains(body, card) || strings.Contains(body, card[4:]) {
		t.Errorf("the saga page shows the card:\n%s", body)
	}
	for _, want := range []string{"card [secret] declined", "&#34;card&#34;: &#34;[secret]&#34;"} {
		if !strings.Contains(body, want) {
			t.Errorf("saga page: %q missing", want)
		}
	}
	if st, _ := r.rt.Coordinator.Get(ctx, "c-1"); st.Input["card"] != card {
		t.Errorf("the stored input lost the card: %v", st.Input["card"])
	}
}
