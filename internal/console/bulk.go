package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/bulk"
)

// The list page's bulk form: a verb of package bulk on every saga its
// filter matches. Posted, it lists the matches and asks to confirm their
// count (acting on none); confirmed, it acts on every match (the listing
// read again: the result says what it did) and shows what it acted on,
// skipped and failed, and why. A filter with neither status nor name is
// refused (too broad for a form), as one of a status the verb does not
// act on.

// bulkPreview is how many matches the confirmation names.
const bulkPreview = 20

// bulkForm is a verb the list page offers for its filter.
type bulkForm struct {
	Verb     string
	Statuses string // what it acts on, for its label
}

// bulkForms are the verbs that act on sagas of status; every verb for
// any status. None without a status or a name.
func bulkForms(status durable.Status, name string) []bulkForm {
	if status == "" && name == "" {
		return nil
	}
	var out []bulkForm
	for _, v := range bulk.Verbs() {
		if status == "" || slices.Contains(v.Statuses, status) {
			out = append(out, bulkForm{Verb: v.Name, Statuses: statusWords(v.Statuses)})
		}
	}
	return out
}

func statusWords(ss []durable.Status) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += " or "
		}
		out += string(s)
	}
	return out
}

// bulkPage is what bulk.html shows: a confirmation, or a result.
type bulkPage struct {
	Title                string
	CSRF                 string
	Verb                 string
	Status, Name, Since  string
	Back                 template.URL // the list with the same filter
	Confirm              bool
	Matched, Read, Acted int
	Preview              []string // the first matches
	More                 int      // the matches not in Preview
	Result               *bulk.Result
	Stopped              string
}

func (s *Server) bulk(w http.ResponseWriter, r *http.Request) {
	verbName := r.PathValue("verb")
	if !s.postForm(w, r, maxFormBytes, "bulk", verbName) {
		return
	}
	verb, ok := bulk.VerbNamed(verbName)
	if !ok {
		s.fail(w, http.StatusNotFound, fmt.Errorf("no bulk action %q", verbName))
		return
	}
	f := r.PostForm
	page := bulkPage{Title: "Confirm " + verb.Name, CSRF: s.csrf, Verb: verb.Name, Status: f.Get("status"), Name: f.Get("name"), Since: f.Get("since")}
	back := url.Values{}
	for k, v := range map[string]string{"status": page.Status, "name": page.Name, "since": page.Since} {
		if v != "" {
			back.Set(k, v)
		}
	}
	page.Back = template.URL("/sagas?" + back.Encode())
	p := bulk.Params{Verb: verb, Status: durable.Status(page.Status), Name: page.Name, DryRun: f.Get("confirm") != "yes"}
	if page.Since != "" {
		t, err := parseSince(page.Since, s.cfg.Now())
		if err != nil {
			s.fail(w, http.StatusBadRequest, err)
			return
		}
		p.After = t
	}
	if err := p.Check(); err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	res, err := bulk.Run(ctx, s.cfg.Source, p)
	if res == nil {
		s.fail(w, errorCode(err), err)
		return
	}
	page.Matched, page.Read = res.Matched, res.Read
	if err != nil {
		page.Stopped = err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			page.Stopped = fmt.Sprintf("the request's time (%s) ran out", s.cfg.RequestTimeout)
		}
	}
	if p.DryRun {
		page.Confirm = true
		page.Preview = res.SagaIDs[:min(bulkPreview, len(res.SagaIDs))]
		page.More = len(res.SagaIDs) - len(page.Preview)
		s.render(w, http.StatusOK, "bulk", page)
		return
	}
	page.Title, page.Result, page.Acted = "Done: "+verb.Name, res, res.Acted()
	s.cfg.Logger.Info("console: bulk action taken", "action", verb.Name, "status", page.Status, "name", page.Name, "since", page.Since,
		"acted", res.Acted(), "skipped", len(res.Skipped), "failed", len(res.Failed))
	code := http.StatusOK
	if len(res.Failed) > 0 || err != nil {
		code = http.StatusInternalServerError
	}
	s.render(w, code, "bulk", page)
}
