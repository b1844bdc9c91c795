package sagactl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// MaxListRead bounds the sagas one `sagactl list` reads from the store's
// listing, and so its --limit: a --name that few sagas match would
// otherwise read the whole index. Past it, list prints a cursor to go on.
const MaxListRead = 10000

// listQuery is what `sagactl list` asks for.
type listQuery struct {
	status durable.Status // empty: every status
	name   string         // empty: every name
	// after, when set, keeps the sagas that entered their status at or
	// after it (--since).
	after  time.Time
	limit  int    // at most this many sagas
	cursor string // where to start: a durable.ListPosition, or empty
}

// listAnswer is what `sagactl list` found.
type listAnswer struct {
	Sagas []durable.SagaSummary
	// NextCursor continues the listing after the last saga read; empty
	// when nothing is left to read.
	NextCursor string
	// Read counts the sagas read from the store's listing, those a --name
	// dropped included: what the listing billed.
	Read int
}

// lister pages through sagas as durable.Store.SagaList does.
type lister interface {
	List(ctx context.Context, p *durable.SagaListParams) (*durable.SagaListResult, error)
}

// listSagas pages through the store's listing (newest StatusSince first,
// by the by_status index on DynamoDB: no scan) until it has q.limit sagas,
// reaches a saga older than q.after (all after it are older still), has
// read MaxListRead, or runs out. The store filters on the status; the name
// is filtered here, so every saga it drops is read (and billed) too. The
// cursor it gives is the position of the last saga read, a
// durable.ListPosition: the store's own cursors are such positions, so
// it goes on from there whether it stopped within a page or at its end.
func listSagas(ctx context.Context, l lister, q listQuery) (*listAnswer, error) {
	p := durable.SagaListParams{Status: q.status, Cursor: q.cursor}
	ans := &listAnswer{Sagas: []durable.SagaSummary{}}
	for {
		want := q.limit - len(ans.Sagas)
		if q.name != "" {
			// Most of what a page holds may be dropped: read the largest
			// pages. Every page queries every shard again (32 per status on
			// DynamoDB, each billing at least half a read unit), so a page
			// of 1,000 bills less than twice one of 100.
			want = dynamo.MaxListLimit
		}
		p.Limit = min(want, MaxListRead-ans.Read)
		res, err := l.List(ctx, &p)
		if err != nil {
			return nil, err
		}
		for i, s := range res.Sagas {
			ans.Read++
			if !q.after.IsZero() && s.StatusSince.Before(q.after) {
				return ans, nil // every saga after it entered its status earlier still
			}
			if q.name == "" || s.Name == q.name {
				ans.Sagas = append(ans.Sagas, s)
			}
			full, spent := len(ans.Sagas) == q.limit, ans.Read == MaxListRead
			if !full && !spent {
				continue
			}
			more := res.NextCursor != ""
			if i+1 < len(res.Sagas) {
				next := res.Sagas[i+1]
				more = q.after.IsZero() || !next.StatusSince.Before(q.after)
			}
			if more {
				ans.NextCursor = durable.ListPosition(s.StatusSince, s.SagaID)
			}
			return ans, nil
		}
		if res.NextCursor == "" {
			return ans, nil
		}
		p.Cursor = res.NextCursor
	}
}

// listReport is list's --json output.
type listReport struct {
	Sagas []listedSaga `json:"sagas"`
	// NextCursor goes on with --cursor; absent when nothing is left.
	NextCursor string `json:"next_cursor,omitempty"`
	// Read counts the sagas read, those --name dropped included.
	Read int `json:"read"`
	// PausedActions are the actions paused now, when a listed saga may
	// call one: which sagas they hold takes each saga's state (status).
	PausedActions []pausedByReport `json:"paused_actions,omitempty"`
}

// listedSaga is one saga of a listing, named as in stateReport.
type listedSaga struct {
	SagaID         string         `json:"saga_id"`
	Saga           string         `json:"saga"`
	Status         durable.Status `json:"status"`
	StatusSince    time.Time      `json:"status_since"`
	CreatedAt      time.Time      `json:"created_at"`
	DefinitionHash string         `json:"definition_hash"`
	// PausedBy is the pause of the saga's name that holds its next step.
	PausedBy *pausedByReport `json:"paused_by,omitempty"`
}

func runList(c *Config, args []string) int {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	var statuses []string
	for _, s := range durable.Statuses() {
		statuses = append(statuses, string(s))
	}
	status := fs.String("status", "", "only sagas in this status: "+strings.Join(statuses, ", "))
	name := fs.String("name", "", "only sagas of this name (the definition's saga:); the listing is read and filtered here, so the sagas it drops are read and billed too")
	since := fs.Duration("since", 0, "only sagas that entered their status within this long of now (e.g. 30m, 24h)")
	limit := fs.Int("limit", 50, fmt.Sprintf("list at most this many sagas (at most %d); past them, a cursor goes on", MaxListRead))
	cursor := fs.String("cursor", "", "go on from where a listing stopped: the cursor it printed")
	asJSON := fs.Bool("json", false, "print the sagas and the cursor as JSON")
	var stack stackFlags
	stack.register(fs)
	rest, code, ok := c.flags(fs, args)
	if !ok {
		return code
	}
	q := listQuery{status: durable.Status(*status), name: *name, limit: *limit, cursor: *cursor}
	switch {
	case len(rest) > 0:
		c.errorf("list: unexpected arguments %v (filter with --status, --name, --since)", rest)
		return ExitUsage
	case q.status != "" && !q.status.Valid():
		c.errorf("list: --status %s: not a status; one of %s", *status, strings.Join(statuses, ", "))
		return ExitUsage
	case *limit < 1 || *limit > MaxListRead:
		c.errorf("list: --limit must be 1 to %d (page on with the cursor a listing prints)", MaxListRead)
		return ExitUsage
	case *since < 0:
		c.errorf("list: --since must not be negative (it keeps the sagas that entered their status within that long of now)")
		return ExitUsage
	case *cursor != "" && !durable.ValidListPosition(*cursor):
		c.errorf("list: --cursor: not a cursor a listing printed")
		return ExitUsage
	}
	if *since > 0 {
		q.after = time.Now().Add(-*since)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := stack.client(ctx, c.APIOptions...)
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	ans, err := listSagas(ctx, cl, q)
	if err != nil {
		c.errorf("list: %v", err)
		return ExitUsage
	}
	lp, err := listPausesOf(ctx, cl.Pauses, ans.Sagas, time.Now())
	if err != nil {
		// The listing stands without the marks, as status stands
		// without its pause line: say so, and list.
		c.errorf("list: %v: the sagas are listed without the pauses that hold them", err)
	}
	if *asJSON {
		r := listReport{Sagas: []listedSaga{}, NextCursor: ans.NextCursor, Read: ans.Read, PausedActions: lp.actions}
		for _, s := range ans.Sagas {
			r.Sagas = append(r.Sagas, listedSaga{SagaID: s.SagaID, Saga: s.Name, Status: s.Status, StatusSince: s.StatusSince, CreatedAt: s.CreatedAt, DefinitionHash: s.DefinitionHash, PausedBy: lp.holds(s)})
		}
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
		return ExitOK
	}
	if len(ans.Sagas) == 0 {
		fmt.Fprintln(c.Stdout, "no sagas")
	} else {
		tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tSINCE\tCREATED")
		for _, s := range ans.Sagas {
			status := string(s.Status)
			if lp.holds(s) != nil {
				status += " (paused)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.SagaID, s.Name, status, listTime(s.StatusSince), listTime(s.CreatedAt))
		}
		_ = tw.Flush()
		lp.print(c)
	}
	if ans.NextCursor != "" {
		if q.name != "" && len(ans.Sagas) < q.limit {
			fmt.Fprintf(c.Stdout, "read %d sagas, the most one listing reads; %d are %s\n", ans.Read, len(ans.Sagas), q.name)
		}
		fmt.Fprintf(c.Stdout, "more: the same list with --cursor %s\n", ans.NextCursor)
	}
	return ExitOK
}

// listPauses is what a listing says of the operator's pauses.
type listPauses struct {
	engine.ListingPauses
	// actions are the action pauses active now, as reported.
	actions []pausedByReport
}

// listPausesOf reads the pauses when a listed saga can be held
// (engine.ReadListingPauses).
func listPausesOf(ctx context.Context, read func(context.Context) ([]durable.Pause, error), sagas []durable.SagaSummary, now time.Time) (listPauses, error) {
	var lp listPauses
	var err error
	lp.ListingPauses, err = engine.ReadListingPauses(ctx, read, sagas, now)
	for _, p := range lp.Actions {
		lp.actions = append(lp.actions, *reportPause(p))
	}
	return lp, err
}

// holds returns the pause of s's name that holds its next step, nil when
// none does.
func (lp listPauses) holds(s durable.SagaSummary) *pausedByReport {
	if p, ok := lp.Holds(s); ok {
		return reportPause(p)
	}
	return nil
}

// print says which actions are paused, below a listing.
func (lp listPauses) print(c *Config) {
	if len(lp.actions) == 0 {
		return
	}
	var names []string
	for _, p := range lp.actions {
		names = append(names, p.Target+untilText(timeOrZero(p.Until)))
	}
	fmt.Fprintf(c.Stdout, "paused actions: %s (a saga whose next step calls one is deferred; %s status ID says which)\n", strings.Join(names, ", "), c.Name)
}

// listTime is a listing's time: UTC to the second.
func listTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}
