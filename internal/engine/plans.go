package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Plans finds the compiled plan a saga pinned, by definition hash: from the
// plans added to it, or else from the store's definitions, compiled once.
// It is safe for concurrent use.
type Plans struct {
	store  durable.Store
	opts   saga.Options
	mu     sync.RWMutex
	by     map[string]*saga.Plan
	stored map[string]bool // hashes known to be in the store
}

// NewPlans returns a plan cache that falls back to store (which may be nil).
func NewPlans(store durable.Store, opts saga.Options) *Plans {
	return &Plans{store: store, opts: opts, by: map[string]*saga.Plan{}, stored: map[string]bool{}}
}

// Add makes plan available by its hash.
func (ps *Plans) Add(plan *saga.Plan) {
	ps.mu.Lock()
	ps.by[plan.Hash()] = plan
	ps.mu.Unlock()
}

// Get returns the plan with the hash, or durable.ErrNotFound.
func (ps *Plans) Get(ctx context.Context, hash string) (*saga.Plan, error) {
	ps.mu.RLock()
	p, ok := ps.by[hash]
	ps.mu.RUnlock()
	if ok {
		return p, nil
	}
	if ps.store == nil {
		return nil, fmt.Errorf("definition %s: %w", hash, durable.ErrNotFound)
	}
	rec, err := ps.store.DefinitionGet(ctx, &durable.DefinitionGetParams{Hash: hash})
	if err != nil {
		return nil, fmt.Errorf("definition %s: %w", hash, err)
	}
	p, err = saga.Compile(rec.Name+".yaml", rec.Source, ps.opts)
	if err != nil {
		return nil, fmt.Errorf("stored definition %s no longer compiles: %w", hash, err)
	}
	if p.Hash() != hash {
		return nil, errors.New("stored definition " + hash + " does not match its hash")
	}
	ps.Add(p)
	ps.mu.Lock()
	ps.stored[hash] = true
	ps.mu.Unlock()
	return p, nil
}

// ensureStored writes plan's definition to store unless this cache has
// seen it there already (definitions are immutable, so once is enough).
func (ps *Plans) ensureStored(ctx context.Context, store durable.Store, plan *saga.Plan) error {
	ps.mu.RLock()
	done := ps.stored[plan.Hash()]
	ps.mu.RUnlock()
	if done {
		return nil
	}
	err := store.DefinitionPut(ctx, &durable.DefinitionPutParams{Hash: plan.Hash(), Name: plan.Name(), Source: plan.Definition().Source})
	if err != nil {
		return err
	}
	ps.mu.Lock()
	ps.stored[plan.Hash()] = true
	ps.mu.Unlock()
	return nil
}
