// Package memstore is a durable.Store held in process memory: for the
// embedded mode, unit tests and benchmarks. It copies what it stores, as a
// real store would, and passes the same storetest suite as store/dynamo.
// Like every adapter it imports only durable of this module.
package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

var _ durable.Store = (*Store)(nil)

// Store is an in-memory durable.Store, safe for concurrent use.
type Store struct {
	mu    sync.RWMutex
	sagas map[string]*durable.SagaRecord
	// wake holds the sagas whose WakeAt is set: SagaListDue reads only
	// these, as the due index of store/dynamo holds only them (a sparse
	// index), not every saga ever stored.
	wake map[string]wakeEntry
	defs map[string]*durable.DefinitionRecord
	// current holds each deployed name's current definition hash.
	current map[string]string
	forks   map[string]*durable.ForkRecord
	// expires holds what SagaExpire and ForkExpire marked: the end of the
	// tree's root, by "saga "+id or "fork "+key. Nothing is deleted: the
	// memory store keeps everything; Expiry shows the marks.
	expires map[string]time.Time
	// pauses holds the operators' pauses (pause.go), under a lock of
	// their own: workers read them beside every saga write.
	pauseMu sync.Mutex
	pauses  map[pauseKey]durable.Pause
	limits  limits
}

// New returns an empty store.
func New() *Store {
	return &Store{sagas: map[string]*durable.SagaRecord{}, wake: map[string]wakeEntry{}, defs: map[string]*durable.DefinitionRecord{}, current: map[string]string{}, forks: map[string]*durable.ForkRecord{}, expires: map[string]time.Time{}}
}

func clone(r *durable.SagaRecord) *durable.SagaRecord {
	c := *r
	c.State = bytes.Clone(r.State)
	return &c
}

// SagaCreate implements durable.Store.
func (s *Store) SagaCreate(_ context.Context, p *durable.SagaCreateParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sagas[p.Record.SagaID]; ok {
		return fmt.Errorf("saga %s: %w", p.Record.SagaID, durable.ErrExists)
	}
	r := clone(&p.Record)
	r.Resends = 0
	s.sagas[p.Record.SagaID] = r
	s.indexWake(r)
	return nil
}

// SagaGet implements durable.Store.
func (s *Store) SagaGet(_ context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.sagas[p.SagaID]
	if !ok {
		return nil, fmt.Errorf("saga %s: %w", p.SagaID, durable.ErrNotFound)
	}
	return clone(r), nil
}

// SagaUpdate implements durable.Store.
func (s *Store) SagaUpdate(_ context.Context, p *durable.SagaUpdateParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.sagas[p.Record.SagaID]
	if !ok {
		return fmt.Errorf("saga %s: %w", p.Record.SagaID, durable.ErrNotFound)
	}
	if r.Version != p.ExpectedVersion || r.Received != p.ExpectedReceived {
		return fmt.Errorf("saga %s is at version %d with %d kept deliveries, not %d with %d: %w", p.Record.SagaID, r.Version, r.Received, p.ExpectedVersion, p.ExpectedReceived, durable.ErrConflict)
	}
	// Reuse the stored buffer: a saga's state is rewritten at every step.
	state := append(r.State[:0], p.Record.State...)
	*r = p.Record
	r.State = state
	r.Resends = 0
	s.indexWake(r)
	delete(s.expires, "saga "+r.SagaID) // the write replaces the saga whole, as store/dynamo's does
	return nil
}

// indexWake keeps r in wake exactly while its WakeAt is set; s.mu is held.
func (s *Store) indexWake(r *durable.SagaRecord) {
	if r.WakeAt.IsZero() {
		delete(s.wake, r.SagaID)
		return
	}
	s.wake[r.SagaID] = wakeEntry{pos: durable.ListPosition(r.WakeAt, r.SagaID), due: durable.SagaDue{SagaID: r.SagaID, WakeAt: r.WakeAt}}
}

// wakeEntry is a saga of the due index: its position in the index's
// order (WakeAt, then id) and what a listing returns of it.
type wakeEntry struct {
	pos string
	due durable.SagaDue
}

// SagaSetResends implements durable.Store.
func (s *Store) SagaSetResends(_ context.Context, p *durable.SagaSetResendsParams) error {
	if p.From < 0 || p.To < 0 {
		return fmt.Errorf("saga %s: re-send counts %d and %d: must not be negative", p.SagaID, p.From, p.To)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.sagas[p.SagaID]
	if !ok {
		return fmt.Errorf("saga %s: %w", p.SagaID, durable.ErrNotFound)
	}
	if r.Version != p.Version || r.Resends != p.From {
		return fmt.Errorf("saga %s is at version %d with %d re-sends, not %d with %d: %w", p.SagaID, r.Version, r.Resends, p.Version, p.From, durable.ErrConflict)
	}
	r.Resends = p.To
	return nil
}

// SagaList implements durable.Store. The order is StatusSince, then
// SagaID, both descending; the cursor is the position of the last saga
// returned in that order, as store/dynamo writes it.
func (s *Store) SagaList(_ context.Context, p *durable.SagaListParams) (*durable.SagaListResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	if p.Cursor != "" && !durable.ValidListPosition(p.Cursor) {
		return nil, fmt.Errorf("list sagas: bad cursor %q", p.Cursor)
	}
	if p.Status != "" && !p.Status.Valid() {
		return nil, fmt.Errorf("list sagas: unknown status %q", p.Status)
	}
	type entry struct {
		pos string
		sm  durable.SagaSummary
	}
	s.mu.RLock()
	var all []entry
	for _, r := range s.sagas {
		if r.Unlisted || p.Status != "" && r.Status != p.Status {
			continue
		}
		if !p.EnteredBefore.IsZero() && !r.StatusSince.Before(p.EnteredBefore) {
			continue
		}
		pos := durable.ListPosition(r.StatusSince, r.SagaID)
		if p.Cursor != "" && pos >= p.Cursor {
			continue
		}
		all = append(all, entry{pos, durable.SagaSummary{SagaID: r.SagaID, Name: r.Name, Status: r.Status, DefinitionHash: r.DefinitionHash, CreatedAt: r.CreatedAt, StatusSince: r.StatusSince}})
	}
	s.mu.RUnlock()
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(b.pos, a.pos) })
	res := &durable.SagaListResult{}
	for _, e := range all[:min(limit, len(all))] {
		res.Sagas = append(res.Sagas, e.sm)
	}
	if len(all) > limit {
		res.NextCursor = all[limit-1].pos
	}
	return res, nil
}

// SagaListDue implements durable.Store: the sagas with a WakeAt before
// p.Before, earliest first; the cursor is the position (durable.ListPosition
// of WakeAt and id) of the last one returned.
func (s *Store) SagaListDue(_ context.Context, p *durable.SagaListDueParams) (*durable.SagaListDueResult, error) {
	if p.Before.IsZero() {
		return nil, fmt.Errorf("list due timers: a Before time is required")
	}
	if p.Cursor != "" && !durable.ValidListPosition(p.Cursor) {
		return nil, fmt.Errorf("list due timers: bad cursor %q", p.Cursor)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	s.mu.RLock()
	// The first limit+1 entries in order: the page, and whether more
	// follow. A small page (the tick's) keeps them by insertion, without
	// sorting every due saga.
	var all []wakeEntry
	for _, e := range s.wake {
		if !e.due.WakeAt.Before(p.Before) || p.Cursor != "" && e.pos <= p.Cursor {
			continue
		}
		if len(all) == limit+1 && e.pos >= all[limit].pos {
			continue
		}
		i, _ := slices.BinarySearchFunc(all, e.pos, func(a wakeEntry, pos string) int { return strings.Compare(a.pos, pos) })
		if len(all) == limit+1 {
			all = all[:limit]
		}
		all = slices.Insert(all, i, e)
	}
	s.mu.RUnlock()
	res := &durable.SagaListDueResult{}
	for _, e := range all[:min(limit, len(all))] {
		res.Sagas = append(res.Sagas, e.due)
	}
	if len(all) > limit {
		res.NextCursor = all[limit-1].pos
	}
	return res, nil
}

// DefinitionPut implements durable.Store.
func (s *Store) DefinitionPut(_ context.Context, p *durable.DefinitionPutParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.defs[p.Hash]; ok {
		if !bytes.Equal(d.Source, p.Source) {
			return fmt.Errorf("definition %s: stored with a different source: %w", p.Hash, durable.ErrConflict)
		}
		return nil
	}
	s.defs[p.Hash] = &durable.DefinitionRecord{Hash: p.Hash, Name: p.Name, Source: bytes.Clone(p.Source)}
	return nil
}

// DefinitionGet implements durable.Store.
func (s *Store) DefinitionGet(_ context.Context, p *durable.DefinitionGetParams) (*durable.DefinitionRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.defs[p.Hash]
	if !ok {
		return nil, fmt.Errorf("definition %s: %w", p.Hash, durable.ErrNotFound)
	}
	c := *d
	c.Source = bytes.Clone(d.Source)
	return &c, nil
}

// DefinitionDeploy implements durable.Store.
func (s *Store) DefinitionDeploy(_ context.Context, p *durable.DefinitionDeployParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.defs[p.Hash]
	if !ok {
		return fmt.Errorf("deploy %s: definition %s: %w", p.Name, p.Hash, durable.ErrNotFound)
	}
	if d.Name != p.Name {
		return fmt.Errorf("deploy %s: definition %s is of saga %s: %w", p.Name, p.Hash, d.Name, durable.ErrConflict)
	}
	s.current[p.Name] = p.Hash
	return nil
}

// DefinitionCurrent implements durable.Store. Its reads are always
// consistent.
func (s *Store) DefinitionCurrent(_ context.Context, p *durable.DefinitionCurrentParams) (*durable.DefinitionRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	h, ok := s.current[p.Name]
	if !ok {
		return nil, fmt.Errorf("saga %s: no definition deployed: %w", p.Name, durable.ErrNotFound)
	}
	c := *s.defs[h]
	c.Source = bytes.Clone(c.Source)
	return &c, nil
}

// ForkCount implements durable.Store.
func (s *Store) ForkCount(_ context.Context, p *durable.ForkCountParams) (*durable.ForkRecord, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.forks[p.Key]
	have := 0
	if r != nil {
		have = r.Count(p.Lane)
	}
	if have != p.Count {
		return nil, fmt.Errorf("fork %s: lane %d holds count %d, not %d: %w", p.Key, p.Lane, have, p.Count, durable.ErrConflict)
	}
	if r == nil {
		r = &durable.ForkRecord{Key: p.Key, Failed: -1}
		s.forks[p.Key] = r
	}
	if p.Lane >= len(r.Counts) {
		r.Counts = append(r.Counts, make([]int, p.Lane+1-len(r.Counts))...)
	}
	r.Counts[p.Lane] = p.Count + 1
	if p.Failed {
		if r.Failed < 0 {
			r.Failed = p.Child
		}
		stop(r, p.Lane)
	}
	return cloneFork(r), nil
}

// forkLocked returns the fork record of key, created empty if there is
// none. s.mu must be held for writing.
func (s *Store) forkLocked(key string) *durable.ForkRecord {
	r := s.forks[key]
	if r == nil {
		r = &durable.ForkRecord{Key: key, Failed: -1}
		s.forks[key] = r
	}
	return r
}

// ForkStop implements durable.Store.
func (s *Store) ForkStop(_ context.Context, p *durable.ForkStopParams) (*durable.ForkRecord, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.forkLocked(p.Key)
	stop(r, p.Lane)
	return cloneFork(r), nil
}

// ForkFail implements durable.Store.
func (s *Store) ForkFail(_ context.Context, p *durable.ForkFailParams) (*durable.ForkRecord, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.forkLocked(p.Key)
	if r.Failed < 0 {
		r.Failed = p.Child
	}
	return cloneFork(r), nil
}

// ForkCancelled implements durable.Store.
func (s *Store) ForkCancelled(_ context.Context, p *durable.ForkCancelledParams) error {
	if err := p.Check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.forkLocked(p.Key)
	if p.Every > 0 {
		r.Cancelled = make([]int, p.Every)
		for j := range r.Cancelled {
			r.Cancelled[j] = j
		}
		return nil
	}
	for _, j := range p.Lanes {
		if i, ok := slices.BinarySearch(r.Cancelled, j); !ok {
			r.Cancelled = slices.Insert(r.Cancelled, i, j)
		}
	}
	return nil
}

// ForkGet implements durable.Store.
func (s *Store) ForkGet(_ context.Context, p *durable.ForkGetParams) (*durable.ForkRecord, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.forks[p.Key]
	if !ok {
		return nil, fmt.Errorf("fork %s: %w", p.Key, durable.ErrNotFound)
	}
	return cloneFork(r), nil
}

// SagaExpire implements durable.Store: it records the mark, which
// SagaExpiry shows.
func (s *Store) SagaExpire(_ context.Context, p *durable.SagaExpireParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sagas[p.SagaID]; !ok {
		return fmt.Errorf("saga %s: %w", p.SagaID, durable.ErrNotFound)
	}
	s.expires["saga "+p.SagaID] = p.EndedAt
	return nil
}

// ForkExpire implements durable.Store: it records the mark, which
// ForkExpiry shows.
func (s *Store) ForkExpire(_ context.Context, p *durable.ForkExpireParams) error {
	if err := p.Check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.forks[p.Key]; !ok {
		return fmt.Errorf("fork %s: %w", p.Key, durable.ErrNotFound)
	}
	s.expires["fork "+p.Key] = p.EndedAt
	return nil
}

// SagaExpiry returns the EndedAt of the last SagaExpire of the saga since
// its last update, and false when it has none: the schedule it would
// expire on.
func (s *Store) SagaExpiry(id string) (time.Time, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	at, ok := s.expires["saga "+id]
	return at, ok
}

// ForkExpiry returns the EndedAt of the last ForkExpire of the fork
// record, and false when it has none.
func (s *Store) ForkExpiry(key string) (time.Time, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	at, ok := s.expires["fork "+key]
	return at, ok
}

// stop adds lane to r's stopped lanes, kept ascending and unique.
func stop(r *durable.ForkRecord, lane int) {
	if i, ok := slices.BinarySearch(r.Stopped, lane); !ok {
		r.Stopped = slices.Insert(r.Stopped, i, lane)
	}
}

func cloneFork(r *durable.ForkRecord) *durable.ForkRecord {
	c := *r
	c.Counts = slices.Clone(r.Counts)
	c.Stopped = slices.Clone(r.Stopped)
	c.Cancelled = slices.Clone(r.Cancelled)
	return &c
}
