package lambdasaga

import (
	"context"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/bulk"
)

// BulkOptions say which sagas Client.Bulk acts on, and how.
type BulkOptions struct {
	// Verb is what it does to each: "cancel" (sagas running, waiting or
	// held), "resume" (sagas parked in compensation_failed), "retry" or
	// "compensate" (sagas held: on_failure: hold).
	Verb string
	// Status keeps the sagas in it, one the verb acts on; empty: each of
	// them.
	Status Status
	// Name keeps the sagas of a definition's name; empty: every name. The
	// listing is filtered as it is read: the sagas it drops are read, and
	// billed, too.
	Name string
	// Since, when set, keeps the sagas that entered their status at or
	// after it.
	Since time.Time
	// All must be set to act with neither Status nor Name: on every saga
	// the verb acts on.
	All bool
	// DryRun lists the matches (BulkResult.IDs) and acts on none.
	DryRun bool
	// Progress, when set, is told after each saga and each page of the
	// listing.
	Progress func(BulkProgress)
}

// BulkProgress is how far Client.Bulk has gone.
type BulkProgress struct {
	Pages   int // pages of the listing read
	Read    int // sagas read from the listing, those filtered out included
	Matched int // sagas the filter kept
	Acted   int // sagas acted on
	Skipped int // sagas skipped (BulkResult.Skipped)
	Failed  int // sagas failed (BulkResult.Failed)
}

// BulkResult is what Client.Bulk did.
type BulkResult struct {
	DryRun  bool     // nothing was acted on
	Read    int      // sagas read from the listing
	Matched int      // sagas the filter kept
	IDs     []string // the sagas acted on; in a dry run, those it would act on
	// Skipped are the matches it did not act on, and why: a saga no
	// longer in the status (acted on already, by a run cut off before, or
	// by somebody else), or showing the verb's effect already.
	Skipped []BulkOutcome
	// Failed are the sagas it could not act on, and why.
	Failed []BulkOutcome
}

// BulkOutcome is a saga skipped or failed, and why.
type BulkOutcome struct {
	ID     string // the saga's id
	Reason string // why it was skipped, or what failed
}

// Bulk acts on every saga o matches, page by page of the listing, newest
// first: each is read, and acted on only if it is still in a status the
// verb acts on, so running it again after an interruption acts on the
// rest and on nothing twice. A saga it could not act on is in Failed and
// the run goes on. It returns what it did so far with an error when the
// listing fails or ctx ends, and an error alone for an unknown verb, a
// status it does not act on, or no filter without All.
func (s *Client) Bulk(ctx context.Context, o BulkOptions) (*BulkResult, error) {
	verb, ok := bulk.VerbNamed(o.Verb)
	if !ok {
		return nil, fmt.Errorf("lambdasaga: Bulk: no verb %q (cancel, resume, retry or compensate)", o.Verb)
	}
	p := bulk.Params{Verb: verb, Status: durable.Status(o.Status), Name: o.Name, After: o.Since, All: o.All, DryRun: o.DryRun}
	if o.Progress != nil {
		p.Progress = func(pr bulk.Progress) {
			o.Progress(BulkProgress{Pages: pr.Pages, Read: pr.Read, Matched: pr.Matched, Acted: pr.Acted, Skipped: pr.Skipped, Failed: pr.Failed})
		}
	}
	res, err := bulk.Run(ctx, s.coord, p)
	if res == nil {
		return nil, err
	}
	out := &BulkResult{DryRun: res.DryRun, Read: res.Read, Matched: res.Matched, IDs: res.SagaIDs}
	for _, sk := range res.Skipped {
		out.Skipped = append(out.Skipped, BulkOutcome{ID: sk.SagaID, Reason: sk.Reason})
	}
	for _, f := range res.Failed {
		out.Failed = append(out.Failed, BulkOutcome{ID: f.SagaID, Reason: f.Reason})
	}
	return out, err
}
