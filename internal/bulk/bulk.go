// Package bulk acts on every saga a filter matches: cancel the running
// sagas of a name, resume those parked since yesterday, retry or
// compensate the held ones. It pages through
// the store's listing (the by_status index on DynamoDB, one status at a
// time, newest first, as `sagactl list` does), reads each saga that
// matches and acts on it with one of the operator's verbs (Verbs), so a
// run cut off half-way can be run again: the sagas it acted on are no
// longer in the status, or show the verb's effect, and are skipped with
// the reason. A failure on one saga is reported with it and the run goes
// on; nothing is acted on twice by one run.
package bulk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Source is what a run reads and acts through: an engine.Coordinator, or
// the console's Source. The verbs find what they call on it by type
// assertion (Verb.Act), so a source needs only the verbs it is used for.
type Source interface {
	// List pages through sagas, newest StatusSince first
	// (durable.Store.SagaList).
	List(ctx context.Context, p *durable.SagaListParams) (*durable.SagaListResult, error)
	// Get reads a saga's state: durable.ErrNotFound when there is none.
	Get(ctx context.Context, sagaID string) (*saga.State, error)
}

// Verb is an operator's action on one saga, as a run applies it.
type Verb struct {
	Name string // the command's: "cancel", "resume"
	// Statuses are those of the sagas it acts on: a filter's status must
	// be one of them, and a saga no longer in one is skipped.
	Statuses []durable.Status
	// Act carries it out on one saga: ErrUnsupported when src cannot.
	Act func(ctx context.Context, src Source, sagaID string) (*saga.State, error)
	// Done, when set, says why a saga in one of Statuses already shows
	// the verb's effect (a cancel requested while an action runs keeps
	// the saga running), so it is skipped; "" to act.
	Done func(st *saga.State) string
}

// ErrUnsupported is a verb the source cannot carry out.
var ErrUnsupported = errors.New("this source cannot do that")

// ErrTooBroad is a run with neither a status nor a name, without All.
var ErrTooBroad = errors.New("too broad")

// Verbs lists the verbs a run takes, by name. Each one is a method of
// engine.Coordinator on one saga by id, found on the Source by an
// interface of its own: a verb is one entry here and, when the source has
// no such method yet, one interface.
func Verbs() []Verb {
	return []Verb{
		{Name: "cancel", Statuses: []durable.Status{durable.StatusRunning, durable.StatusWaiting, durable.StatusHeld}, Act: call(canceler.Cancel), Done: cancelRequested},
		{Name: "resume", Statuses: []durable.Status{durable.StatusCompensationFailed}, Act: call(resumer.Resume)},
		{Name: "retry", Statuses: []durable.Status{durable.StatusHeld}, Act: call(retrier.Retry)},
		{Name: "compensate", Statuses: []durable.Status{durable.StatusHeld}, Act: call(compensator.Compensate)},
	}
}

type canceler interface {
	Cancel(ctx context.Context, sagaID string) (*saga.State, error)
}

type resumer interface {
	Resume(ctx context.Context, sagaID string) (*saga.State, error)
}

type retrier interface {
	Retry(ctx context.Context, sagaID string) (*saga.State, error)
}

type compensator interface {
	Compensate(ctx context.Context, sagaID string) (*saga.State, error)
}

// call makes a verb's Act of a method of an interface the source may
// have.
func call[T any](method func(T, context.Context, string) (*saga.State, error)) func(context.Context, Source, string) (*saga.State, error) {
	return func(ctx context.Context, src Source, sagaID string) (*saga.State, error) {
		a, ok := src.(T)
		if !ok {
			return nil, ErrUnsupported
		}
		return method(a, ctx, sagaID)
	}
}

func cancelRequested(st *saga.State) string {
	if st.CancelRequested {
		return "cancel already requested"
	}
	return ""
}

// VerbNamed returns the verb of a name.
func VerbNamed(name string) (Verb, bool) {
	i := slices.IndexFunc(Verbs(), func(v Verb) bool { return v.Name == name })
	if i < 0 {
		return Verb{}, false
	}
	return Verbs()[i], true
}

// Params say what a run acts on, and how.
type Params struct {
	Verb Verb
	// Status keeps the sagas in it, one of Verb.Statuses; empty: each of
	// them.
	Status durable.Status
	// Name keeps the sagas of this definition name; empty: every name.
	// The listing is filtered here, so the sagas it drops are read (and
	// billed) too.
	Name string
	// After, when set, keeps the sagas that entered their status at or
	// after it.
	After time.Time
	// All allows a run with neither Status nor Name: every saga the verb
	// acts on.
	All bool
	// DryRun lists the matches (Result.SagaIDs) and acts on none.
	DryRun bool
	// PageSize is the sagas asked of each page of the listing; 0: 100,
	// or 1,000 (store/dynamo's largest) with Name, where most of a page
	// may be dropped.
	PageSize int
	// Progress, when set, is told after each saga and each page.
	Progress func(Progress)
}

// Check refuses a run that is not safe or cannot act: a status the verb
// does not act on, or no filter without All. Its message says what to
// give.
func (p *Params) Check() error {
	v := p.Verb
	if v.Act == nil {
		return errors.New("bulk: no verb")
	}
	if p.Status != "" && !slices.Contains(v.Statuses, p.Status) {
		return fmt.Errorf("%s acts on sagas %s, not %s", v.Name, statusList(v.Statuses), p.Status)
	}
	if p.Status == "" && p.Name == "" && !p.All {
		return fmt.Errorf("%s of every saga %s is %w: give a status (%s), a name, or both", v.Name, statusList(v.Statuses), ErrTooBroad, statusList(v.Statuses))
	}
	return nil
}

// statusList is "running or waiting".
func statusList(ss []durable.Status) string {
	var names []string
	for _, s := range ss {
		names = append(names, string(s))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Progress is how far a run has gone.
type Progress struct {
	Status  durable.Status // the status being listed
	Pages   int            // pages read, over every status
	Read    int            // sagas read from the listing, those filtered out included
	Matched int            // sagas the filter kept
	Acted   int
	Skipped int
	Failed  int
	// PageDone: told at the end of a page; else after a saga.
	PageDone bool
}

// Outcome is a saga skipped or failed, and why.
type Outcome struct {
	SagaID string `json:"saga_id"`
	Reason string `json:"reason"`
}

// Result is what a run did.
type Result struct {
	Verb    string `json:"verb"`
	DryRun  bool   `json:"dry_run,omitempty"`
	Read    int    `json:"read"`    // sagas read from the listing: what it billed
	Matched int    `json:"matched"` // sagas the filter kept
	// SagaIDs are the matches of a dry run, in listing order; the sagas
	// acted on otherwise.
	SagaIDs []string  `json:"saga_ids"`
	Skipped []Outcome `json:"skipped"`
	Failed  []Outcome `json:"failed"`
}

// Acted counts the sagas acted on (none in a dry run).
func (r *Result) Acted() int {
	if r.DryRun {
		return 0
	}
	return len(r.SagaIDs)
}

// tries bounds the attempts on one saga that lost a race (a conflict, or
// a status changed between the read and the act): the engine retries
// conflicts itself, so this is for sagas under heavy traffic.
const tries = 3

// Run acts on every saga p matches. It returns the result so far with an
// error when the listing fails or ctx ends (run again to go on: what was
// done is skipped); a saga it could not act on is in Result.Failed, and
// the run goes on.
func Run(ctx context.Context, src Source, p Params) (*Result, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	res := &Result{Verb: p.Verb.Name, DryRun: p.DryRun, SagaIDs: []string{}, Skipped: []Outcome{}, Failed: []Outcome{}}
	statuses := p.Verb.Statuses
	if p.Status != "" {
		statuses = []durable.Status{p.Status}
	}
	size := p.PageSize
	if size == 0 {
		size = 100
		if p.Name != "" {
			size = 1000
		}
	}
	pr := Progress{}
	tell := func(pageDone bool) {
		if p.Progress != nil {
			pr.Read, pr.Matched, pr.Skipped, pr.Failed, pr.PageDone = res.Read, res.Matched, len(res.Skipped), len(res.Failed), pageDone
			pr.Acted = res.Acted()
			p.Progress(pr)
		}
	}
	for _, status := range statuses {
		pr.Status = status
		lp := durable.SagaListParams{Status: status, Limit: size}
		for {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			page, err := src.List(ctx, &lp)
			if err != nil {
				return res, fmt.Errorf("list %s sagas: %w", status, err)
			}
			pr.Pages++
			older := false
			for _, s := range page.Sagas {
				res.Read++
				if !p.After.IsZero() && s.StatusSince.Before(p.After) {
					older = true // every saga after it entered its status earlier still
					break
				}
				if p.Name != "" && s.Name != p.Name {
					continue
				}
				res.Matched++
				if p.DryRun {
					res.SagaIDs = append(res.SagaIDs, s.SagaID)
					continue
				}
				if err := ctx.Err(); err != nil {
					return res, err
				}
				one(ctx, src, p.Verb, s.SagaID, res)
				tell(false)
			}
			tell(true)
			if older || page.NextCursor == "" {
				break
			}
			lp.Cursor = page.NextCursor
		}
	}
	return res, nil
}

// one acts on a saga the listing matched, after reading it: one no longer
// in a status the verb acts on, or showing its effect already, is skipped.
func one(ctx context.Context, src Source, v Verb, sagaID string, res *Result) {
	for attempt := 1; ; attempt++ {
		st, err := src.Get(ctx, sagaID)
		switch {
		case errors.Is(err, durable.ErrNotFound):
			res.Skipped = append(res.Skipped, Outcome{sagaID, "gone (expired or deleted)"})
			return
		case err != nil:
			res.Failed = append(res.Failed, Outcome{sagaID, "read: " + err.Error()})
			return
		case !slices.Contains(v.Statuses, st.Status):
			res.Skipped = append(res.Skipped, Outcome{sagaID, "now " + string(st.Status)})
			return
		}
		if v.Done != nil {
			if why := v.Done(st); why != "" {
				res.Skipped = append(res.Skipped, Outcome{sagaID, why})
				return
			}
		}
		_, err = v.Act(ctx, src, sagaID)
		switch {
		case err == nil:
			res.SagaIDs = append(res.SagaIDs, sagaID)
			return
		case (errors.Is(err, durable.ErrConflict) || errors.Is(err, saga.ErrInvalidEvent)) && attempt < tries && ctx.Err() == nil:
			continue // another writer won: read it again
		default:
			res.Failed = append(res.Failed, Outcome{sagaID, err.Error()})
			return
		}
	}
}
