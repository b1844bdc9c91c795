package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/lambdasaga/lambdasaga/durable"
)

// Limits is the optional part of a Source that sets action limits
// (docs/PROTOCOL.md, "Action limits"); the console finds it by type
// assertion and shows its Limits page only then.
type Limits interface {
	// Limits returns every action's limit, by action name.
	Limits(ctx context.Context) ([]durable.Limit, error)
	// SetLimit sets an action's limit, replacing any.
	SetLimit(ctx context.Context, l durable.Limit) error
	// UnsetLimit removes an action's limit: durable.ErrNotFound when it
	// has none.
	UnsetLimit(ctx context.Context, action string) error
}

var _ Limits = (*Coordinator)(nil)

// Limits implements Limits.
func (c *Coordinator) Limits(ctx context.Context) ([]durable.Limit, error) {
	return c.Coord.Limits(ctx)
}

// SetLimit implements Limits.
func (c *Coordinator) SetLimit(ctx context.Context, l durable.Limit) error {
	return c.Coord.SetLimit(ctx, l)
}

// UnsetLimit implements Limits.
func (c *Coordinator) UnsetLimit(ctx context.Context, action string) error {
	return c.Coord.UnsetLimit(ctx, action)
}

// limitsPage is what limits.html shows.
type limitsPage struct {
	Title  string
	CSRF   string
	Limits []limitRow
	Result *result
	// Confirm, when set, is the change asked for, to confirm.
	Confirm *limitChange
}

type limitRow struct {
	durable.Limit
	Shown string // what it allows, in words
}

// limitChange is a set or unset to confirm, and the fields posted again.
type limitChange struct {
	Verb, Action, What string
	Fields             []field
}

// routeLimits serves the Limits page when the source sets limits.
func (s *Server) routeLimits(mux *http.ServeMux, base *template.Template) {
	if _, ok := s.cfg.Source.(Limits); !ok {
		return
	}
	s.pages["limits"] = template.Must(template.Must(base.Clone()).ParseFS(assets, "assets/limits.html"))
	mux.HandleFunc("GET /limits", s.limits)
	mux.HandleFunc("POST /limits/{verb}", s.limitAct)
}

func (s *Server) limits(w http.ResponseWriter, r *http.Request) {
	s.renderLimits(w, r.Context(), http.StatusOK, nil, nil)
}

func (s *Server) renderLimits(w http.ResponseWriter, ctx context.Context, code int, res *result, confirm *limitChange) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	ls, err := s.cfg.Source.(Limits).Limits(ctx)
	if err != nil {
		s.fail(w, errorCode(err), fmt.Errorf("limits: %w", err))
		return
	}
	page := &limitsPage{Title: "Limits", CSRF: s.csrf, Result: res, Confirm: confirm}
	for _, l := range ls {
		page.Limits = append(page.Limits, limitRow{Limit: l, Shown: l.Describe()})
	}
	s.render(w, code, "limits", page)
}

func (s *Server) limitAct(w http.ResponseWriter, r *http.Request) {
	verb := r.PathValue("verb")
	if !s.postForm(w, r, maxFormBytes, "limit", verb) {
		return
	}
	change, l, err := limitForm(verb, r.PostForm)
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	if r.PostForm.Get("confirm") != "yes" {
		s.renderLimits(w, r.Context(), http.StatusOK, nil, change)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	src := s.cfg.Source.(Limits)
	if verb == "set" {
		err = src.SetLimit(ctx, l)
	} else {
		err = src.UnsetLimit(ctx, l.Action)
	}
	res, code := &result{OK: err == nil, Message: fmt.Sprintf("limit of %s %s: every worker enforces it within 5 s", l.Action, verb)}, http.StatusOK
	if err != nil {
		code = errorCode(err)
		if errors.Is(err, durable.ErrNotFound) {
			code = http.StatusNotFound
		}
		res.Message = fmt.Sprintf("%s limit of %s failed: %v", verb, l.Action, err)
		s.cfg.Logger.Warn("console: limit not changed", "action", l.Action, "verb", verb, "err", err)
	} else {
		s.cfg.Logger.Info("console: limit changed", "action", l.Action, "verb", verb)
	}
	s.renderLimits(w, r.Context(), code, res, nil)
}

// limitForm reads a set or unset form, checked.
func limitForm(verb string, form url.Values) (*limitChange, durable.Limit, error) {
	l := durable.Limit{Action: strings.TrimSpace(form.Get("action"))}
	if l.Action == "" {
		return nil, l, errors.New("an action is required")
	}
	switch verb {
	case "unset":
		return &limitChange{Verb: verb, Action: l.Action, What: "its calls run unlimited", Fields: []field{{"action", l.Action}}}, l, nil
	case "set":
	default:
		return nil, l, fmt.Errorf("no limit verb %q: set or unset", verb)
	}
	for name, dst := range map[string]*int{"rate": &l.Rate, "burst": &l.Burst, "concurrency": &l.Concurrency} {
		v := strings.TrimSuffix(strings.TrimSpace(form.Get(name)), "/s")
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, l, fmt.Errorf("%s %q: a whole number", name, v)
		}
		*dst = n
	}
	if err := l.Check(); err != nil {
		return nil, l, err
	}
	fields := []field{{"action", l.Action}}
	for _, f := range []struct {
		name string
		n    int
	}{{"rate", l.Rate}, {"burst", l.Burst}, {"concurrency", l.Concurrency}} {
		if f.n > 0 {
			fields = append(fields, field{f.name, strconv.Itoa(f.n)})
		}
	}
	return &limitChange{Verb: verb, Action: l.Action, What: l.Describe() + "; a call over it is deferred a second or two, never failed", Fields: fields}, l, nil
}
