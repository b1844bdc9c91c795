package lambdasaga

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/redrive"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// The errors a caller tells apart with errors.Is.
var (
	// ErrNotFound: no saga has that id, or no definition is deployed
	// under that name (StartNamed).
	ErrNotFound = durable.ErrNotFound
	// ErrInvalidDefinition: a definition has problems; the error lists
	// each, with its file:line, step and field.
	ErrInvalidDefinition = lang.ErrInvalidDefinition
	// ErrInvalidInput: a start's input does not match the definition's
	// declared input, or an id is not one.
	ErrInvalidInput = saga.ErrInvalidInput
	// ErrExists: a start with the id of a saga that runs another
	// definition or input.
	ErrExists = durable.ErrExists
	// ErrInvalidEvent: the saga is not where the request applies (resume
	// of a saga not parked, say).
	ErrInvalidEvent = saga.ErrInvalidEvent
	// ErrNotReceiving: the saga compensates or has ended, or no await of
	// the signal's name is anywhere in its tree.
	ErrNotReceiving = saga.ErrNotReceiving
	// ErrKeptFull: the saga keeps as many signals as it may (16, 64 KiB)
	// for awaits it has not reached.
	ErrKeptFull = saga.ErrKeptFull
	// ErrBadToken: a callback token that is not one.
	ErrBadToken = saga.ErrBadToken
	// ErrTokenNotAwaited: a callback token of an attempt the saga no
	// longer waits on.
	ErrTokenNotAwaited = saga.ErrTokenNotAwaited
	// ErrBadDelivery: a signal or a completion that cannot be taken (a
	// name, payload or output out of bounds).
	ErrBadDelivery = saga.ErrBadDelivery
)

// StartOptions says which saga to start and with what.
type StartOptions struct {
	// ID identifies the saga: 1 to 128 letters, digits, '_', '.', ':' or
	// '-', starting with a letter or digit. A start with an id that
	// exists, the same definition and input, returns that saga (a retry
	// starts nothing); another definition or input is refused. Empty: 32
	// random hex digits.
	ID string
	// Input is the saga's input, checked against the definition's
	// declared input; nil is an empty object.
	Input map[string]any
}

// SignalOptions are the optional parts of a signal.
type SignalOptions struct {
	// ID makes the signal idempotent: sent again with the same id (a retry
	// after a timeout), it is taken once, and the repeat's receipt is
	// ReceiptDuplicate. Empty: a random id.
	ID string
}

// Receipt says what became of a signal or a callback's completion.
type Receipt string

// The receipts.
const (
	// ReceiptApplied: the await or callback it completes went on.
	ReceiptApplied = Receipt(saga.ReceiptApplied)
	// ReceiptKept: kept for the await (or the action still running) that
	// will take it.
	ReceiptKept = Receipt(saga.ReceiptKept)
	// ReceiptDuplicate: one of the same id was applied or kept already.
	ReceiptDuplicate = Receipt(saga.ReceiptDuplicate)
)

// Delivered is what became of a signal or a callback's completion, and
// the run that took it: the saga, or the run of its tree it went to (a
// branch, an iteration, a child saga; Saga.ID names it).
type Delivered struct {
	Receipt Receipt // applied, kept or duplicate
	Saga    *Saga   // the run that took it, after it
}

// ListOptions selects a page of sagas, those that entered their status
// most recently first.
type ListOptions struct {
	Status Status // empty: every status
	// Limit: at most this many; 0 means 100 (DynamoDB returns at most
	// 1,000).
	Limit int
	// Cursor continues a listing (SagaPage.Next); empty: the first page.
	Cursor string
	// InStatusFor keeps only the sagas in their status for at least this
	// long.
	InStatusFor time.Duration
}

// SagaPage is one page of a listing.
type SagaPage struct {
	Sagas []SagaSummary // the newest in their status first
	Next  string        // the cursor of the next page; empty on the last
}

// SagaSummary is a saga as a listing shows it; Get reads the rest.
type SagaSummary struct {
	ID          string    // the saga's id
	Name        string    // its definition's name
	Status      Status    // its status when listed
	CreatedAt   time.Time // when it started
	StatusSince time.Time // when it entered Status
}

// HistoryEntry is one thing that happened to a saga, oldest first: a
// step started, ended, retried, waited or was compensated; a signal or a
// callback came; it was cancelled or resumed.
type HistoryEntry struct {
	Version uint64    // the version the transition wrote
	At      time.Time // to the millisecond
	// Cause is what made the transition: start, result, timer, cancel,
	// resume, signal, callback, join, undo or undone.
	Cause string
	// Status is the status the transition moved the saga to; empty when
	// it kept it.
	Status Status
	Step   string // the step; empty for an entry of no step
	// Outcome is how the step moved: started, completed, failed, retried,
	// caught, waiting, skipped, kept, and the like; empty for no step.
	Outcome      string
	Attempt      int           // the attempt that started or ended; 0 for a skip
	Compensation bool          // the entry is of the step's compensation
	Took         time.Duration // how long the action ran, when measured
	Error        *Failure      // the error the step failed or retried with
	Signal       string        // the signal a delivery carried
}

// Client starts, reads, lists, signals, cancels and resumes sagas, and
// completes their callback tokens: against a deployment (NewClient), or
// in this process (Local, which embeds one). It runs no actions.
type Client struct {
	coord *engine.Coordinator
	plans *engine.Plans
	rt    *embedded.Runtime // in process: deliveries go through it, so virtual time waits for them
	clock durable.Clock     // the sagas' time
	// deadLetters finds the queues' dead letters for Redrive; nil: none.
	deadLetters redrive.Finder
}

// view reads the definition st runs to mask its secrets and name its
// step; a definition that cannot be read hides what may hold a secret.
func (s *Client) view(ctx context.Context, st *saga.State) *Saga {
	if st == nil {
		return nil
	}
	plan, err := s.plans.Get(ctx, st.DefinitionHash)
	if err != nil {
		plan = nil
	}
	return sagaOf(st, plan)
}

// Start starts a saga of def, idempotently by its id, and returns it as
// its first version is: the functions (or Local's workers) run it on.
func (s *Client) Start(ctx context.Context, def *Definition, o StartOptions) (*Saga, error) {
	if def == nil {
		return nil, errors.New("start: a definition is required")
	}
	st, err := s.coord.Start(ctx, &engine.StartParams{Plan: def.plan, SagaID: o.ID, Input: o.Input})
	if err != nil {
		return nil, err
	}
	return sagaOf(st, def.plan), nil
}

// Deployed is one definition a deploy made the current version of its
// name.
type Deployed struct {
	Name string // the saga's name
	Hash string // the definition's hash (Definition.Hash), now current for Name
	// Changed: Hash was not the current version of Name before; false
	// when the deploy changed nothing.
	Changed bool
}

// Deploy stores def and makes it the current version of its name, which
// StartNamed runs from then on; sagas already started keep the version
// they started with. Each child saga def calls (saga steps) is deployed
// as well, under its own name, before def. It returns def's deployment
// first, then its children's. Deploying the current version again
// changes nothing.
func (s *Client) Deploy(ctx context.Context, def *Definition) ([]Deployed, error) {
	if def == nil {
		return nil, errors.New("deploy: a definition is required")
	}
	ds, err := s.coord.Deploy(ctx, def.plan)
	if err != nil {
		return nil, err
	}
	out := make([]Deployed, len(ds))
	for i, d := range ds {
		out[i] = Deployed{Name: d.Name, Hash: d.Hash, Changed: d.Changed}
	}
	return out, nil
}

// StartNamed starts a saga of the current version of the deployed saga
// name (Deploy), idempotently by its id: a start repeated after another
// version was deployed returns the saga the first one started, on its own
// version. ErrNotFound when no definition is deployed under name. A
// process reads a name's current version at most every few seconds, so a
// version deployed elsewhere is run by its starts a few seconds later.
func (s *Client) StartNamed(ctx context.Context, name string, o StartOptions) (*Saga, error) {
	if name == "" {
		return nil, errors.New("start: a saga name is required")
	}
	st, err := s.coord.Start(ctx, &engine.StartParams{Name: name, SagaID: o.ID, Input: o.Input})
	if err != nil {
		return nil, err
	}
	return s.view(ctx, st), nil
}

// SignalWithStartOptions is a signal-with-start: the saga to start unless
// it exists, and the signal it gets either way.
type SignalWithStartOptions struct {
	// Definition is the saga to start; nil: the current version of the
	// deployed saga Name.
	Definition *Definition
	// Name names a deployed saga, when Definition is nil.
	Name string
	// Start is the saga's id (required) and its input, as for Start. A
	// saga of that id that exists is signalled whatever its definition
	// and input: they are not compared.
	Start   StartOptions
	Signal  string // the signal's name, as an await names it
	Payload any    // the signal's payload: any JSON-able value
	// SignalID makes the call idempotent: a retry (after a timeout, say)
	// starts nothing more and its signal is a duplicate. Empty: a random
	// id, and a retry signals again.
	SignalID string
}

// SignalWithStartResult says what a signal-with-start did.
type SignalWithStartResult struct {
	// Started: this call started the saga; false when it existed (a retry
	// of a call that started it included).
	Started   bool
	Delivered *Delivered // what became of the signal
}

// SignalWithStart starts a saga unless one of its id exists, and sends it
// a signal either way: one call for "the first event of a saga starts
// it, the later ones find it". A call that failed part way is finished by
// calling it again with the same options; concurrent calls for one id
// start the saga once.
func (s *Client) SignalWithStart(ctx context.Context, o SignalWithStartOptions) (*SignalWithStartResult, error) {
	p := &engine.SignalWithStartParams{
		Start:  engine.StartParams{Name: o.Name, SagaID: o.Start.ID, Input: o.Start.Input},
		Signal: engine.SignalParams{SagaID: o.Start.ID, Name: o.Signal, Payload: o.Payload, ID: o.SignalID},
	}
	if o.Definition != nil {
		p.Start.Plan = o.Definition.plan
	}
	var (
		res *engine.SignalWithStartResult
		err error
	)
	if s.rt != nil {
		res, err = s.rt.SignalWithStart(ctx, p)
	} else {
		res, err = s.coord.SignalWithStart(ctx, p)
	}
	if err != nil {
		return nil, err
	}
	d, _ := s.delivered(ctx, res.Delivered, nil)
	return &SignalWithStartResult{Started: res.Started, Delivered: d}, nil
}

// Get reads a saga; ErrNotFound when there is none of that id.
func (s *Client) Get(ctx context.Context, id string) (*Saga, error) {
	st, err := s.coord.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, st), nil
}

// List pages through the sagas, those that entered their status most
// recently first.
func (s *Client) List(ctx context.Context, o ListOptions) (*SagaPage, error) {
	p := &durable.SagaListParams{Status: durable.Status(o.Status), Limit: o.Limit, Cursor: o.Cursor}
	if o.InStatusFor > 0 {
		p.EnteredBefore = s.clock.Now().Add(-o.InStatusFor)
	}
	res, err := s.coord.List(ctx, p)
	if err != nil {
		return nil, err
	}
	page := &SagaPage{Next: res.NextCursor, Sagas: make([]SagaSummary, len(res.Sagas))}
	for i, m := range res.Sagas {
		page.Sagas[i] = SagaSummary{ID: m.SagaID, Name: m.Name, Status: Status(m.Status), CreatedAt: m.CreatedAt, StatusSince: m.StatusSince}
	}
	return page, nil
}

// History is what happened to a saga, oldest first, as far back as the
// history it keeps reaches (the newest transitions within its bound).
func (s *Client) History(ctx context.Context, id string) ([]HistoryEntry, error) {
	st, err := s.coord.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	plan, err := s.plans.Get(ctx, st.DefinitionHash)
	if err != nil {
		return nil, fmt.Errorf("saga %s: its definition: %w", id, err)
	}
	entries, err := st.HistoryEntries(plan)
	if err != nil {
		return nil, fmt.Errorf("saga %s: %w", id, err)
	}
	red := plan.Redactor(st) // of the saga as stored: it knows the secret values to mask
	out := make([]HistoryEntry, len(entries))
	for i, e := range entries {
		out[i] = HistoryEntry{Version: e.Version, At: e.At, Cause: e.Cause.String(), Status: Status(e.Status), Step: e.Step,
			Outcome: string(e.Outcome), Attempt: e.Attempt, Compensation: e.Compensation, Took: e.Took, Signal: e.Signal}
		if e.Error != nil {
			out[i].Error = failureOf(red.StepError(e.Error))
		}
	}
	return out, nil
}

// Signal sends the signal name to a saga with payload (any JSON-able
// value), for the await that takes it: the saga's, or that of the run of
// its tree that awaits it. A signal that comes before its await is kept
// for it.
func (s *Client) Signal(ctx context.Context, id, name string, payload any, o SignalOptions) (*Delivered, error) {
	if s.rt != nil {
		d, err := s.rt.Signal(ctx, id, name, payload, embedded.SignalID(o.ID))
		return s.delivered(ctx, d, err)
	}
	d, err := s.coord.Signal(ctx, &engine.SignalParams{SagaID: id, Name: name, Payload: payload, ID: o.ID})
	return s.delivered(ctx, d, err)
}

// CompleteCallback completes a callback token (Call.CallbackToken) with
// the step's output: the step goes on. A second completion of the token
// is a duplicate.
func (s *Client) CompleteCallback(ctx context.Context, token string, output any) (*Delivered, error) {
	if s.rt != nil {
		d, err := s.rt.CompleteCallback(ctx, token, output)
		return s.delivered(ctx, d, err)
	}
	d, err := s.coord.CompleteCallback(ctx, token, output)
	return s.delivered(ctx, d, err)
}

// FailCallback fails the attempt of a callback token with an error type
// (what retry.permanent and catch match) and a message: the step retries
// with a new token, or fails.
func (s *Client) FailCallback(ctx context.Context, token, errType, message string) (*Delivered, error) {
	if s.rt != nil {
		d, err := s.rt.FailCallback(ctx, token, errType, message)
		return s.delivered(ctx, d, err)
	}
	d, err := s.coord.FailCallback(ctx, token, errType, message)
	return s.delivered(ctx, d, err)
}

func (s *Client) delivered(ctx context.Context, d *engine.Delivered, err error) (*Delivered, error) {
	if err != nil {
		return nil, err
	}
	return &Delivered{Receipt: Receipt(d.Receipt), Saga: s.view(ctx, d.State)}, nil
}

// Cancel stops a saga: the action running finishes, and the saga
// compensates. Cancelling a saga cancelled already changes nothing.
func (s *Client) Cancel(ctx context.Context, id string) (*Saga, error) {
	st, err := s.coord.Cancel(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, st), nil
}

// Resume continues the compensation of a saga parked in
// compensation_failed, from the compensation that failed.
func (s *Client) Resume(ctx context.Context, id string) (*Saga, error) {
	st, err := s.coord.Resume(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, st), nil
}

// Retry runs the step a held saga failed on again (a definition with
// on_failure: hold), with its retry policy's attempts afresh and the same
// idempotency key: an operator fixed what made it fail. Retrying a saga
// whose retry landed already changes nothing.
func (s *Client) Retry(ctx context.Context, id string) (*Saga, error) {
	st, err := s.coord.Retry(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, st), nil
}

// Compensate compensates a held saga, as its failure would have without
// on_failure: hold.
func (s *Client) Compensate(ctx context.Context, id string) (*Saga, error) {
	st, err := s.coord.Compensate(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, st), nil
}

// SkipCompensation continues a saga parked in compensation_failed without
// the compensation that failed: an operator has undone that step by hand.
func (s *Client) SkipCompensation(ctx context.Context, id string) (*Saga, error) {
	st, err := s.coord.SkipCompensation(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.view(ctx, st), nil
}
