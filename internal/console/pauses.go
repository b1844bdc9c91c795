package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// PauseSource is what a Source may also do: list, make and lift the
// operators' pauses (docs/PROTOCOL.md, "Pauses"). The console finds it by
// type assertion; without it the pauses page says there are none to
// manage.
type PauseSource interface {
	// Pauses lists the pauses, expired ones included.
	Pauses(ctx context.Context) ([]durable.Pause, error)
	// Pause makes a pause, replacing the one of its kind and target.
	Pause(ctx context.Context, p *engine.PauseParams) error
	// Unpause lifts a pause: durable.ErrNotFound when there is none.
	Unpause(ctx context.Context, kind durable.PauseKind, target string) error
	// PausedBy returns the pause that holds the step st waits on, if one
	// does now (engine.Coordinator.PausedBy).
	PausedBy(ctx context.Context, st *saga.State) (durable.Pause, bool, error)
}

// Pauses implements PauseSource.
func (c *Coordinator) Pauses(ctx context.Context) ([]durable.Pause, error) {
	return c.Coord.Pauses(ctx)
}

// Pause implements PauseSource.
func (c *Coordinator) Pause(ctx context.Context, p *engine.PauseParams) error {
	return c.Coord.Pause(ctx, p)
}

// Unpause implements PauseSource.
func (c *Coordinator) Unpause(ctx context.Context, kind durable.PauseKind, target string) error {
	return c.Coord.Unpause(ctx, kind, target)
}

// PausedBy implements PauseSource.
func (c *Coordinator) PausedBy(ctx context.Context, st *saga.State) (durable.Pause, bool, error) {
	return c.Coord.PausedBy(ctx, st)
}

// listPauses reads the pauses for a list page when a listed saga can be
// held (one item), and marks the sagas a pause of their name holds.
func (s *Server) listPauses(ctx context.Context, page *listPage) error {
	ps, ok := s.cfg.Source.(PauseSource)
	if !ok {
		return nil
	}
	lp, err := engine.ReadListingPauses(ctx, ps.Pauses, page.Sagas, s.cfg.Now())
	if err != nil {
		return err
	}
	for _, sum := range page.Sagas {
		if p, ok := lp.Holds(sum); ok {
			if page.PausedBy == nil {
				page.PausedBy = map[string]*durable.Pause{}
			}
			page.PausedBy[sum.SagaID] = &p
		}
	}
	page.PausedActions = lp.Actions
	return nil
}

// pausedBy returns the pause that holds st's next step, nil when none
// does or the source keeps no pauses.
func (s *Server) pausedBy(ctx context.Context, st *saga.State) (*durable.Pause, error) {
	ps, ok := s.cfg.Source.(PauseSource)
	if !ok {
		return nil, nil
	}
	p, held, err := ps.PausedBy(ctx, st)
	if err != nil || !held {
		return nil, err
	}
	return &p, nil
}

// pausesPage is what pauses.html shows.
type pausesPage struct {
	Title   string
	CSRF    string
	Pauses  []pauseRow
	Kinds   []durable.PauseKind
	Managed bool // the source keeps pauses
	Result  *result
}

type pauseRow struct {
	durable.Pause
	Expired bool
}

// pauseConfirmPage is what pauseconfirm.html shows.
type pauseConfirmPage struct {
	Title, CSRF, Op, Warning string
	Fields                   []field
}

func (s *Server) pauses(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	page, err := s.pausesPage(ctx)
	if err != nil {
		s.fail(w, errorCode(err), err)
		return
	}
	s.render(w, http.StatusOK, "pauses", page)
}

func (s *Server) pausesPage(ctx context.Context) (*pausesPage, error) {
	page := &pausesPage{Title: "Pauses", CSRF: s.csrf, Kinds: durable.PauseKinds()}
	ps, ok := s.cfg.Source.(PauseSource)
	if !ok {
		return page, nil
	}
	page.Managed = true
	list, err := ps.Pauses(ctx)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	for _, p := range list {
		page.Pauses = append(page.Pauses, pauseRow{Pause: p, Expired: !p.Active(now)})
	}
	return page, nil
}

// pauseAct pauses or unpauses (op), after a confirmation, as act does for
// a saga.
func (s *Server) pauseAct(w http.ResponseWriter, r *http.Request) {
	op := r.PathValue("op")
	if !s.postForm(w, r, maxFormBytes, "action", op) {
		return
	}
	ps, ok := s.cfg.Source.(PauseSource)
	if !ok {
		s.fail(w, http.StatusNotImplemented, errors.New("this console's source keeps no pauses"))
		return
	}
	f := r.PostForm
	kind, target, until := durable.PauseKind(f.Get("kind")), f.Get("target"), f.Get("until")
	params := engine.PauseParams{Kind: kind, Target: target, Compensations: f.Get("compensations") == "yes"}
	if err := (&durable.PauseDeleteParams{Kind: kind, Target: target}).Check(); err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	var warning string
	fields := []field{{"kind", string(kind)}, {"target", target}}
	switch op {
	case "pause":
		if until != "" {
			t, err := time.Parse(time.RFC3339, until)
			if err != nil {
				d, derr := time.ParseDuration(until)
				if derr != nil || d <= 0 {
					s.fail(w, http.StatusBadRequest, fmt.Errorf("until %q: give an RFC 3339 time or a positive duration (2h)", until))
					return
				}
				t = s.cfg.Now().Add(d)
			}
			params.Until = t
			fields = append(fields, field{"until", t.UTC().Format(time.RFC3339)})
		}
		what := "the steps of every saga named " + target
		if kind == durable.PauseAction {
			what = "every call of action " + target + ", in any saga"
		}
		warning = "Holds " + what + ": each is deferred, its message sent again a minute later, no attempt spent, until you unpause. Compensations, deadlines and cancels go on"
		if params.Compensations {
			warning += "; its compensations are held too"
			fields = append(fields, field{"compensations", "yes"})
		}
		warning += "."
	case "unpause":
		warning = fmt.Sprintf("Lifts the pause of %s %s: the steps it held run within a minute.", kind, target)
	default:
		s.fail(w, http.StatusNotFound, fmt.Errorf("no such action %q", op))
		return
	}
	if f.Get("confirm") != "yes" {
		s.render(w, http.StatusOK, "pauseconfirm", pauseConfirmPage{Title: "Confirm " + op, CSRF: s.csrf, Op: op, Warning: warning, Fields: fields})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	var err error
	if op == "pause" {
		err = ps.Pause(ctx, &params)
	} else {
		err = ps.Unpause(ctx, kind, target)
	}
	res := &result{OK: err == nil, Message: fmt.Sprintf("%sd %s %s", op, kind, target)}
	code := http.StatusOK
	if err != nil {
		code = errorCode(err)
		res.Message = fmt.Sprintf("%s failed: %v", op, err)
		s.cfg.Logger.Warn("console: action failed", "action", op, "kind", kind, "target", target, "err", err)
	} else {
		s.cfg.Logger.Info("console: action taken", "action", op, "kind", kind, "target", target)
	}
	page, perr := s.pausesPage(ctx)
	if perr != nil {
		s.fail(w, code, errors.Join(errors.New(res.Message), perr))
		return
	}
	page.Result = res
	s.render(w, code, "pauses", page)
}
