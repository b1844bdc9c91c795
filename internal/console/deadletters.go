package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"

	"github.com/lambdasaga/lambdasaga/internal/redrive"
)

// DeadLetters is a Source that can count and redrive the dead letters of
// its queues: the console's dead-letter page is there when its Source is
// one.
type DeadLetters interface {
	// Redrive moves the dead letters of queues (none: all) back, or with
	// p.DryRun counts them (client.Client.Redrive).
	Redrive(ctx context.Context, queues []redrive.Queue, p redrive.Params) (*redrive.Result, error)
}

// deadLettersPage is what deadletters.html shows: the queues' depths, or
// the redrive to confirm, or what it did.
type deadLettersPage struct {
	Title          string
	CSRF           string
	Result         *redrive.Result
	Error          string
	Confirm        bool   // a redrive to confirm
	Queue          string // the form's: "" for all
	Max            int
	IncludeRefused bool
	Done           bool // Result is a redrive's, not a count
}

// routeDeadLetters adds the dead-letter page and its redrive.
func (s *Server) routeDeadLetters(mux *http.ServeMux, base *template.Template) {
	s.pages["deadletters"] = template.Must(template.Must(base.Clone()).ParseFS(assets, "assets/deadletters.html"))
	mux.HandleFunc("GET /dead-letters", s.deadLetters)
	mux.HandleFunc("POST /dead-letters/redrive", s.redrive)
}

func (s *Server) deadLetterSource(w http.ResponseWriter) (DeadLetters, bool) {
	dl, ok := s.cfg.Source.(DeadLetters)
	if !ok {
		s.fail(w, http.StatusNotFound, errors.New("this console's sagas have no dead-letter queues it can reach"))
	}
	return dl, ok
}

// deadLetters counts each dead-letter queue's letters (a GetQueueAttributes
// each), and offers the redrive.
func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	dl, ok := s.deadLetterSource(w)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	page := deadLettersPage{Title: "Dead letters", CSRF: s.csrf}
	res, err := dl.Redrive(ctx, nil, redrive.Params{DryRun: true})
	page.Result = res
	if err != nil {
		page.Error = err.Error()
	}
	s.render(w, http.StatusOK, "deadletters", page)
}

// redrive confirms, then moves the dead letters the form names back,
// within the console's request timeout: a queue longer than that moves in
// part (the page says so), and sagactl redrive moves the rest.
func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	if !s.postForm(w, r, 4096, "action", "redrive") {
		return
	}
	dl, ok := s.deadLetterSource(w)
	if !ok {
		return
	}
	page := deadLettersPage{Title: "Redrive dead letters", CSRF: s.csrf, Queue: r.PostForm.Get("queue"), IncludeRefused: r.PostForm.Get("include_refused") == "yes"}
	var queues []redrive.Queue
	if page.Queue != "" {
		q, err := redrive.ParseQueue(page.Queue)
		if err != nil {
			s.fail(w, http.StatusBadRequest, err)
			return
		}
		queues = []redrive.Queue{q}
	}
	if v := r.PostForm.Get("max"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.fail(w, http.StatusBadRequest, fmt.Errorf("max: %q is not a count (0 or empty: all)", v))
			return
		}
		page.Max = n
	}
	if r.PostForm.Get("confirm") != "yes" {
		page.Confirm = true
		s.render(w, http.StatusOK, "deadletters", page)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	res, err := dl.Redrive(ctx, queues, redrive.Params{Max: page.Max, IncludeRefused: page.IncludeRefused})
	page.Result, page.Done = res, true
	code := http.StatusOK
	if err != nil {
		page.Error = err.Error()
		if res == nil {
			code = errorCode(err)
		}
		s.cfg.Logger.Warn("console: redrive failed", "err", err)
	}
	if res != nil {
		s.cfg.Logger.Info("console: redrive", "queue", page.Queue, "moved", res.Moved)
	}
	s.render(w, code, "deadletters", page)
}
