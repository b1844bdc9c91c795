// Package console is the operator's web console that `sagactl console`
// serves: the list of sagas with filters, a saga's page (its graph
// coloured by step status, its history as a timeline, its input and vars)
// and the actions an operator takes (cancel, resume, signal, complete or
// fail a callback), each confirmed on a page of its own before it acts.
//
// Its pages are HTML rendered on the server from assets built into the
// binary: no script, no CDN, nothing fetched. It has no authentication:
// it listens on loopback (CheckAddr), refuses a Host that is not a
// loopback name (DNS rebinding), and every action is a POST that carries
// the server's CSRF token and, when the browser sends one, a same-origin
// Origin.
package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

//go:embed assets
var assets embed.FS

// Config sets up a Server. Source is required.
type Config struct {
	// Source reads and acts on the sagas; required.
	Source Source
	// Logger gets a line per action taken and per error; default: discard.
	Logger *slog.Logger
	// Now is the time "since" filters count back from; default time.Now.
	Now func() time.Time
	// PageSize is how many sagas a list page shows; default 50, at most
	// 1,000 (what store/dynamo returns at most in one page).
	PageSize int
	// AllowRemote turns off the check that requests name a loopback host
	// (the defence against DNS rebinding), for a console served on
	// another interface on purpose.
	AllowRemote bool
	// RequestTimeout bounds the calls one request makes to Source;
	// default 30s.
	RequestTimeout time.Duration
}

// Server serves the console. It is an http.Handler.
type Server struct {
	cfg   Config
	csrf  string
	pages map[string]*template.Template
	mux   *http.ServeMux
}

// New returns a console on cfg.Source.
func New(cfg Config) (*Server, error) {
	if cfg.Source == nil {
		return nil, errors.New("console: a Source is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 50
	}
	if cfg.PageSize < 0 || cfg.PageSize > 1000 {
		return nil, fmt.Errorf("console: PageSize %d: use 1 to 1000", cfg.PageSize)
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	var token [32]byte
	_, _ = rand.Read(token[:]) // crypto/rand.Read never fails (Go 1.24+)
	s := &Server{cfg: cfg, csrf: hex.EncodeToString(token[:]), pages: map[string]*template.Template{}}
	funcs := template.FuncMap{
		"time":     formatTime,
		"duration": formatDuration,
		"statuses": durable.Statuses,
		"legend":   StepStatuses,
	}
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/graph.html"))
	for _, page := range []string{"list", "saga", "confirm", "error", "bulk", "pauses", "pauseconfirm"} {
		s.pages[page] = template.Must(template.Must(base.Clone()).ParseFS(assets, "assets/"+page+".html"))
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/sagas", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /sagas", s.list)
	mux.HandleFunc("GET /sagas/{id}", s.saga)
	mux.HandleFunc("POST /sagas/{id}/{action}", s.act)
	mux.HandleFunc("POST /bulk/{verb}", s.bulk) // bulk.go
	s.routeDeadLetters(mux, base)               // deadletters.go
	mux.HandleFunc("GET /pauses", s.pauses)
	mux.HandleFunc("POST /pauses/{op}", s.pauseAct)
	s.routeLimits(mux, base)
	s.mux = mux
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.AllowRemote && !loopbackHost(r.Host) {
		// A page of another site whose name resolves to 127.0.0.1 (DNS
		// rebinding) would be same-origin with itself, and read the
		// token: only loopback names reach the console.
		s.fail(w, http.StatusMisdirectedRequest, fmt.Errorf("host %q is not a loopback name: the console answers 127.0.0.1, [::1] and localhost only (sagactl console --allow-remote serves other names)", r.Host))
		return
	}
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'none'; frame-ancestors 'none'; form-action 'self'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// Not no-referrer: under it a browser sends the console's own forms
	// with "Origin: null", which the CSRF guard must refuse.
	w.Header().Set("Referrer-Policy", "same-origin")
	s.mux.ServeHTTP(w, r)
}

// CheckAddr refuses a listen address that is not on loopback unless
// allowRemote: the console has no authentication, and anyone who reaches
// it can cancel sagas, resume them and complete their callbacks.
func CheckAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %v", addr, err)
	}
	if allowRemote || loopbackHost(host) {
		return nil
	}
	return fmt.Errorf("address %q is not on loopback: the console has no authentication and anyone who reaches it can cancel and resume sagas; listen on 127.0.0.1 (the default), or pass --allow-remote behind your own access control", addr)
}

// loopbackHost reports whether host (a Host header, with or without a
// port) names the loopback interface.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listPage is what list.html shows.
type listPage struct {
	Title      string
	Status     string
	Name       string
	Since      string
	Sagas      []durable.SagaSummary
	NextCursor string
	Next       template.URL // the next page's address
	Error      string
	CSRF       string
	Bulk       []bulkForm // what the filter's matches can be acted on with (bulk.go)
	// PausedBy are the pauses of their name that hold listed sagas, by
	// saga id; PausedActions the action pauses active (pauses.go).
	PausedBy      map[string]*durable.Pause
	PausedActions []durable.Pause
	PauseError    string // the pauses could not be read: the list stands unmarked
}

// maxListReads bounds the store pages one list page reads while a name or
// since filter passes over sagas it does not show.
const maxListReads = 20

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page := listPage{Title: "Sagas", Status: q.Get("status"), Name: q.Get("name"), Since: q.Get("since")}
	status := durable.Status(page.Status)
	if status != "" && !status.Valid() {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("status %q: not one of %v", page.Status, durable.Statuses()))
		return
	}
	var since time.Time
	if page.Since != "" {
		t, err := parseSince(page.Since, s.cfg.Now())
		if err != nil {
			s.fail(w, http.StatusBadRequest, err)
			return
		}
		since = t
	}
	cursor := q.Get("cursor")
	if cursor != "" && !durable.ValidListPosition(cursor) {
		s.fail(w, http.StatusBadRequest, errors.New("cursor: not one this console made (start again from the first page)"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	// The store pages newest first: the name is matched here, and the
	// listing stops at the first saga older than since.
	for reads := 0; reads < maxListReads; reads++ {
		res, err := s.cfg.Source.List(ctx, &durable.SagaListParams{Status: status, Limit: s.cfg.PageSize - len(page.Sagas), Cursor: cursor})
		if err != nil {
			s.fail(w, errorCode(err), fmt.Errorf("list: %w", err))
			return
		}
		cursor = res.NextCursor
		for _, sum := range res.Sagas {
			if !since.IsZero() && sum.StatusSince.Before(since) {
				cursor = ""
				break
			}
			if page.Name == "" || sum.Name == page.Name {
				page.Sagas = append(page.Sagas, sum)
			}
		}
		if cursor == "" || len(page.Sagas) >= s.cfg.PageSize {
			break
		}
	}
	if cursor != "" {
		next := url.Values{"cursor": {cursor}}
		for k, v := range map[string]string{"status": page.Status, "name": page.Name, "since": page.Since} {
			if v != "" {
				next.Set(k, v)
			}
		}
		page.NextCursor = cursor
		// Built here, every value query-escaped: the template would
		// escape the query's own = and & if it were given the string.
		page.Next = template.URL("/sagas?" + next.Encode())
	}
	if err := s.listPauses(ctx, &page); err != nil {
		page.PauseError = err.Error()
	}
	page.CSRF, page.Bulk = s.csrf, bulkForms(status, page.Name)
	s.render(w, http.StatusOK, "list", page)
}

// parseSince reads a since filter: a duration back from now (90m, 2h,
// 3d) or an RFC 3339 time.
func parseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	const day = 24 * time.Hour
	if days, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.ParseInt(days, 10, 64); err == nil && n >= 0 {
			// Past the range of a duration (about 292 years), n days
			// would wrap round, as ParseDuration refuses hours that do.
			if n > int64(math.MaxInt64/day) {
				return time.Time{}, fmt.Errorf("since %q: at most %dd (the range of a duration), or an RFC 3339 time", v, math.MaxInt64/day)
			}
			return now.Add(-time.Duration(n) * day), nil
		}
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("since %q: give a duration back from now (90m, 2h, 3d) or an RFC 3339 time", v)
	}
	return now.Add(-d), nil
}

// sagaPage is what saga.html shows.
type sagaPage struct {
	Title    string
	CSRF     string
	State    *saga.State
	Steps    []node
	History  []Entry
	Input    string
	Vars     string
	Output   string
	Pause    *pause
	PausedBy *durable.Pause // the operator's pause that holds its next step
	Result   *result
	Parent   string // a child run's parent saga
	CanAct   map[string]bool
	Statuses []StepStatus
}

// pause is what a waiting saga waits on.
type pause struct {
	Kind   string // wait, await, callback
	Step   string
	Signal string // await
	Token  string // callback
	Until  time.Time
}

// result is what an action did, shown above the saga.
type result struct {
	OK      bool
	Message string
}

func (s *Server) saga(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	id := r.PathValue("id")
	if !durable.ValidSagaID(id) {
		s.fail(w, http.StatusBadRequest, errors.New("not a saga id"))
		return
	}
	page, err := s.sagaPage(ctx, id)
	if err != nil {
		s.fail(w, errorCode(err), err)
		return
	}
	s.render(w, http.StatusOK, "saga", page)
}

// sagaPage reads what a saga's page shows.
func (s *Server) sagaPage(ctx context.Context, id string) (*sagaPage, error) {
	st, err := s.cfg.Source.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	plan, err := s.cfg.Source.Plan(ctx, st.DefinitionHash)
	if err != nil {
		return nil, fmt.Errorf("saga %s: its definition: %w", id, err)
	}
	history, err := s.cfg.Source.History(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("saga %s: its history: %w", id, err)
	}
	statuses := stepStatuses(plan, st, history)
	// What the page shows of values and messages passes the saga's
	// redactor: its secret inputs are masked wherever they appear. The
	// callback token is made from the saga itself (the shown copy drops
	// its key).
	red := plan.Redactor(st)
	shown := red.State(st)
	for i := range history {
		history[i].ErrorMessage = red.Text(history[i].ErrorMessage)
	}
	page := &sagaPage{Title: "Saga " + id, CSRF: s.csrf, State: shown, Steps: graphOf(plan, st, statuses, history), History: history,
		Input: jsonText(shown.Input), Vars: jsonText(shown.Vars), Pause: pauseOf(plan, st), Statuses: StepStatuses()}
	if page.PausedBy, err = s.pausedBy(ctx, st); err != nil {
		return nil, fmt.Errorf("saga %s: the pauses: %w", id, err)
	}
	if st.Status == durable.StatusSucceeded {
		page.Output = jsonText(shown.Output)
	}
	if st.Parent != nil {
		page.Parent = st.Parent.ID
	}
	page.CanAct = map[string]bool{
		"cancel":     st.Status == durable.StatusRunning || st.Status == durable.StatusWaiting || st.Status == durable.StatusHeld,
		"resume":     st.Status == durable.StatusCompensationFailed,
		"retry":      st.Status == durable.StatusHeld,
		"compensate": st.Status == durable.StatusHeld,
		"signal":     st.Status == durable.StatusRunning || st.Status == durable.StatusWaiting,
		"callback":   page.Pause != nil && page.Pause.Kind == "callback",
	}
	return page, nil
}

// pauseOf says what a waiting saga waits on; nil when it waits on nothing.
func pauseOf(plan *saga.Plan, st *saga.State) *pause {
	cur, ok := st.Pending()
	steps := plan.Steps()
	if !ok || !cur.Wait || cur.Compensating || st.Status != durable.StatusWaiting || cur.Step < 0 || cur.Step >= len(steps) {
		return nil
	}
	step := steps[cur.Step]
	p := &pause{Kind: "wait", Step: step.ID, Until: cur.Due}
	switch {
	case step.Kind == lang.KindAwait:
		p.Kind, p.Signal = "await", step.Await.Signal
	case step.Callback != nil:
		p.Kind, p.Token = "callback", plan.CallbackToken(st)
	}
	return p
}

// jsonText is v as indented JSON.
func jsonText(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("(cannot show: %v)", err)
	}
	return string(b)
}

// maxFormBytes bounds a form: a signal's payload or a callback's output
// (lang.MaxSignalBytes) and a little more.
const maxFormBytes = 2*lang.MaxSignalBytes + 4096

// confirmPage is what confirm.html shows: the action, what it does, and
// the form that acts.
type confirmPage struct {
	Title   string
	CSRF    string
	SagaID  string
	Action  string
	Warning string
	Fields  []field
}

type field struct{ Name, Value string }

func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	if !s.postForm(w, r, maxFormBytes, "saga_id", id, "action", action) {
		return
	}
	if !durable.ValidSagaID(id) {
		s.fail(w, http.StatusBadRequest, errors.New("not a saga id"))
		return
	}
	warning, fields, err := s.describe(action, r.PostForm)
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	if r.PostForm.Get("confirm") != "yes" {
		s.render(w, http.StatusOK, "confirm", confirmPage{Title: "Confirm " + action, CSRF: s.csrf, SagaID: id, Action: action, Warning: warning, Fields: fields})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	msg, err := s.do(ctx, id, action, r.PostForm)
	res := &result{OK: err == nil, Message: msg}
	code := http.StatusOK
	if err != nil {
		code = errorCode(err)
		res.Message = fmt.Sprintf("%s failed: %v", action, err)
		s.cfg.Logger.Warn("console: action failed", "saga_id", id, "action", action, "err", err)
	} else {
		s.cfg.Logger.Info("console: action taken", "saga_id", id, "action", action)
	}
	page, perr := s.sagaPage(ctx, id)
	if perr != nil {
		s.fail(w, code, errors.Join(errors.New(res.Message), perr))
		return
	}
	page.Result = res
	s.render(w, code, "saga", page)
}

// postForm reads a POST's form (at most limit bytes) and refuses it, on
// w, when it is malformed or fails checkCSRF; logAttrs say what was asked
// in the log line of a refusal. It reports whether the handler goes on.
func (s *Server) postForm(w http.ResponseWriter, r *http.Request, limit int64, logAttrs ...any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("form: %v", err))
		return false
	}
	if err := s.checkCSRF(r); err != nil {
		s.cfg.Logger.Warn("console: refused a request", append(logAttrs, "err", err)...)
		s.fail(w, http.StatusForbidden, err)
		return false
	}
	return true
}

// checkCSRF refuses a POST that does not carry the server's token, or
// whose browser says it comes from another origin.
func (s *Server) checkCSRF(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return fmt.Errorf("refused: the request comes from another site (Sec-Fetch-Site: %s)", site)
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host != r.Host {
			return fmt.Errorf("refused: the request comes from another origin (%s)", origin)
		}
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.csrf)) != 1 {
		return errors.New("refused: the form does not carry this console's token (reload the page: a restarted console has a new one)")
	}
	return nil
}

// describe checks an action's form and says what it does, for the
// confirmation; fields are what the confirmation posts again.
func (s *Server) describe(action string, form url.Values) (string, []field, error) {
	keep := func(names ...string) []field {
		var out []field
		for _, n := range names {
			if v := form.Get(n); v != "" {
				out = append(out, field{n, v})
			}
		}
		return out
	}
	switch action {
	case "cancel":
		return "Cancel the saga: it stops and compensates every step it completed (an action in flight is awaited first).", nil, nil
	case "resume":
		return "Resume the saga: the compensation that failed runs again, then the rest of the compensations.", nil, nil
	case "retry":
		return "Retry the held saga: the step it failed on runs again, with its retry policy's attempts afresh and the same idempotency key.", nil, nil
	case "compensate":
		return "Compensate the held saga: every step it completed is undone, newest first, as its failure would have without on_failure: hold.", nil, nil
	case "signal":
		name := form.Get("name")
		if name == "" {
			return "", nil, errors.New("signal: give the signal's name")
		}
		if p := form.Get("payload"); p != "" && !json.Valid([]byte(p)) {
			return "", nil, errors.New("signal: the payload is not valid JSON")
		}
		return fmt.Sprintf("Send the signal %q: an await of it goes on with the payload; a running saga that does not await it yet keeps it.", name), keep("name", "payload"), nil
	case "callback":
		if form.Get("token") == "" {
			return "", nil, errors.New("callback: give the callback token")
		}
		if t := form.Get("error_type"); t != "" {
			return fmt.Sprintf("Fail the callback's attempt with the error %q: the step retries or fails, and the saga compensates.", t), keep("token", "error_type", "message"), nil
		}
		out := form.Get("output")
		if out == "" || !json.Valid([]byte(out)) {
			return "", nil, errors.New("callback: give the step's output as JSON, or an error type to fail it")
		}
		return "Complete the callback with this output: the step goes on.", keep("token", "output"), nil
	}
	return "", nil, fmt.Errorf("unknown action %q (cancel, resume, retry, compensate, signal, callback)", action)
}

// do takes a confirmed action and says what it did.
func (s *Server) do(ctx context.Context, id, action string, form url.Values) (string, error) {
	src := s.cfg.Source
	switch action {
	case "cancel":
		st, err := src.Cancel(ctx, id)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Cancelled: the saga is %s.", st.Status), nil
	case "resume":
		st, err := src.Resume(ctx, id)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Resumed: the saga is %s.", st.Status), nil
	case "retry":
		st, err := src.Retry(ctx, id)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Retried: the saga is %s.", st.Status), nil
	case "compensate":
		st, err := src.Compensate(ctx, id)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Compensating: the saga is %s.", st.Status), nil
	case "signal":
		p := &engine.SignalParams{SagaID: id, Name: form.Get("name")}
		if v := form.Get("payload"); v != "" {
			p.Payload = json.RawMessage(v)
		}
		d, err := src.Signal(ctx, p)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Signal %s: %s.", p.Name, d.Receipt), nil
	case "callback":
		var d *engine.Delivered
		var err error
		if t := form.Get("error_type"); t != "" {
			d, err = src.FailCallback(ctx, form.Get("token"), t, form.Get("message"))
		} else {
			d, err = src.CompleteCallback(ctx, form.Get("token"), json.RawMessage(form.Get("output")))
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Callback: %s.", d.Receipt), nil
	}
	return "", fmt.Errorf("unknown action %q", action)
}

// errorCode is the HTTP status of a Source's error.
func errorCode(err error) int {
	switch {
	case errors.Is(err, durable.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, saga.ErrBadDelivery), errors.Is(err, saga.ErrBadToken):
		return http.StatusBadRequest
	case errors.Is(err, saga.ErrNotReceiving), errors.Is(err, saga.ErrTokenNotAwaited), errors.Is(err, saga.ErrKeptFull),
		errors.Is(err, saga.ErrInvalidEvent), errors.Is(err, durable.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// errorPage is what error.html shows.
type errorPage struct {
	Title   string
	Code    int
	Message string
}

func (s *Server) fail(w http.ResponseWriter, code int, err error) {
	if code >= 500 {
		s.cfg.Logger.Error("console: request failed", "err", err)
	}
	s.render(w, code, "error", errorPage{Title: http.StatusText(code), Code: code, Message: err.Error()})
}

func (s *Server) render(w http.ResponseWriter, code int, page string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if err := s.pages[page].ExecuteTemplate(w, "layout.html", data); err != nil {
		s.cfg.Logger.Error("console: render", "page", page, "err", err)
	}
}

// formatTime shows a time in UTC to the second; "" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// formatDuration shows a duration rounded to the millisecond; "" for
// zero (not known).
func formatDuration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	if d < time.Millisecond {
		return "<1ms"
	}
	return d.Round(time.Millisecond).String()
}
