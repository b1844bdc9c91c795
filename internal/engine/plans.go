package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Plans finds the compiled plan a saga pinned, by definition hash: from the
// plans added to it, or else from the store's definitions, compiled once.
// It finds the current version of a deployed name too (Current). It is
// safe for concurrent use.
type Plans struct {
	store   durable.Store
	opts    saga.Options
	mu      sync.RWMutex
	by      map[string]*saga.Plan
	stored  map[string]bool         // hashes known to be in the store
	current map[string]currentEntry // by name: its current version, as last read or deployed here
}

// currentEntry is a name's current version as this process last saw it.
type currentEntry struct {
	hash  string
	until time.Time // read again from then on
}

// CurrentTTL is how long Plans.Current trusts the current version of a
// name it read: a burst of starts by name reads the store once, and a
// deploy made by another process is run by the starts of this one at most
// this long after it (plus the store's own delay, store/dynamo's eventually
// consistent read). A deploy made through this process's Coordinator is
// run at once.
const CurrentTTL = 5 * time.Second

// NewPlans returns a plan cache that falls back to store (which may be nil).
func NewPlans(store durable.Store, opts saga.Options) *Plans {
	return &Plans{store: store, opts: opts, by: map[string]*saga.Plan{}, stored: map[string]bool{}, current: map[string]currentEntry{}}
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
	return ps.compile(rec)
}

// compile returns the plan of a stored definition: the one added under
// its hash, or else compiled and added.
func (ps *Plans) compile(rec *durable.DefinitionRecord) (*saga.Plan, error) {
	ps.mu.RLock()
	p, ok := ps.by[rec.Hash]
	ps.mu.RUnlock()
	if ok {
		return p, nil
	}
	p, err := saga.Compile(rec.Name+".yaml", rec.Source, ps.opts)
	if err != nil {
		return nil, fmt.Errorf("stored definition %s no longer compiles: %w", rec.Hash, err)
	}
	if p.Hash() != rec.Hash {
		return nil, errors.New("stored definition " + rec.Hash + " does not match its hash")
	}
	ps.Add(p)
	ps.mu.Lock()
	ps.stored[rec.Hash] = true
	ps.mu.Unlock()
	return p, nil
}

// Current returns the plan of the current version of the saga name (the
// definition last deployed for it), compiled once per hash. It reads the
// store at most once per CurrentTTL per name (now is the time to judge
// that by). A name never deployed is an error wrapping
// durable.ErrNotFound that names it.
func (ps *Plans) Current(ctx context.Context, name string, now time.Time) (*saga.Plan, error) {
	ps.mu.RLock()
	e, ok := ps.current[name]
	ps.mu.RUnlock()
	if ok && now.Before(e.until) {
		return ps.Get(ctx, e.hash)
	}
	if ps.store == nil {
		return nil, fmt.Errorf("saga %s: no definition deployed: %w", name, durable.ErrNotFound)
	}
	rec, err := ps.store.DefinitionCurrent(ctx, &durable.DefinitionCurrentParams{Name: name})
	if errors.Is(err, durable.ErrNotFound) {
		return nil, fmt.Errorf("saga %s: no definition deployed under this name (sagactl deploy): %w", name, durable.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("saga %s: current definition: %w", name, err)
	}
	p, err := ps.compile(rec)
	if err != nil {
		return nil, fmt.Errorf("saga %s: %w", name, err)
	}
	if p.Name() != name {
		return nil, fmt.Errorf("saga %s: the definition deployed, %s, is of saga %s", name, rec.Hash, p.Name())
	}
	ps.setCurrent(name, rec.Hash, now)
	return p, nil
}

// setCurrent notes hash as the current version of name, until CurrentTTL
// after now.
func (ps *Plans) setCurrent(name, hash string, now time.Time) {
	ps.mu.Lock()
	ps.current[name] = currentEntry{hash: hash, until: now.Add(CurrentTTL)}
	ps.mu.Unlock()
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
