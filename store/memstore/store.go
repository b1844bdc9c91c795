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
	"strconv"
	"sync"

	"github.com/lambdasaga/lambdasaga/durable"
)

var _ durable.Store = (*Store)(nil)

// Store is an in-memory durable.Store, safe for concurrent use.
type Store struct {
	mu    sync.RWMutex
	sagas map[string]*durable.SagaRecord
	defs  map[string]*durable.DefinitionRecord
}

// New returns an empty store.
func New() *Store {
	return &Store{sagas: map[string]*durable.SagaRecord{}, defs: map[string]*durable.DefinitionRecord{}}
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
	s.sagas[p.Record.SagaID] = clone(&p.Record)
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
	if r.Version != p.ExpectedVersion {
		return fmt.Errorf("saga %s is at version %d, not %d: %w", p.Record.SagaID, r.Version, p.ExpectedVersion, durable.ErrConflict)
	}
	// Reuse the stored buffer: a saga's state is rewritten at every step.
	state := append(r.State[:0], p.Record.State...)
	*r = p.Record
	r.State = state
	return nil
}

// SagaList implements durable.Store. The cursor is the offset into the
// ordering (updated time descending, then id).
func (s *Store) SagaList(_ context.Context, p *durable.SagaListParams) (*durable.SagaListResult, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	offset := 0
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("list sagas: bad cursor %q", p.Cursor)
		}
		offset = n
	}
	s.mu.RLock()
	all := make([]durable.SagaSummary, 0, len(s.sagas))
	for _, r := range s.sagas {
		if p.Status == "" || r.Status == p.Status {
			all = append(all, durable.SagaSummary{SagaID: r.SagaID, Name: r.Name, Status: r.Status, Version: r.Version, DefinitionHash: r.DefinitionHash, UpdatedAt: r.UpdatedAt})
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(all, func(a, b durable.SagaSummary) int {
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		if a.SagaID < b.SagaID {
			return -1
		}
		return 1
	})
	res := &durable.SagaListResult{}
	if offset >= len(all) {
		return res, nil
	}
	end := min(offset+limit, len(all))
	res.Sagas = all[offset:end]
	if end < len(all) {
		res.NextCursor = strconv.Itoa(end)
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
