package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Plans finds the compiled plan a saga pinned, by definition hash: from the
// plans added to it, or else from the store's definitions, compiled once.
// It is safe for concurrent use.
type Plans struct {
	store Store
	opts  Options
	mu    sync.RWMutex
	by    map[string]*Plan
}

// NewPlans returns a plan cache that falls back to store (which may be nil).
func NewPlans(store Store, opts Options) *Plans {
	return &Plans{store: store, opts: opts, by: map[string]*Plan{}}
}

// Add makes plan available by its hash.
func (ps *Plans) Add(plan *Plan) {
	ps.mu.Lock()
	ps.by[plan.Hash()] = plan
	ps.mu.Unlock()
}

// Get returns the plan with the hash, or ErrNotFound.
func (ps *Plans) Get(ctx context.Context, hash string) (*Plan, error) {
	ps.mu.RLock()
	p, ok := ps.by[hash]
	ps.mu.RUnlock()
	if ok {
		return p, nil
	}
	if ps.store == nil {
		return nil, fmt.Errorf("definition %s: %w", hash, ErrNotFound)
	}
	rec, err := ps.store.DefinitionGet(ctx, &DefinitionGetParams{Hash: hash})
	if err != nil {
		return nil, fmt.Errorf("definition %s: %w", hash, err)
	}
	p, err = Compile(rec.Name+".yaml", rec.Source, ps.opts)
	if err != nil {
		return nil, fmt.Errorf("stored definition %s no longer compiles: %w", hash, err)
	}
	if p.Hash() != hash {
		return nil, errors.New("stored definition " + hash + " does not match its hash")
	}
	ps.Add(p)
	return p, nil
}
