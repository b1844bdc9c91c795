package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/lambdasaga/lambdasaga/durable"
)

var _ durable.Limiter = (*Store)(nil)

// limits holds the action limits and the state that enforces them, under
// its own lock: a limited call does not wait on the sagas' writes.
type limits struct {
	mu      sync.Mutex
	config  map[string]durable.Limit
	windows map[string]map[int64]int               // calls counted, by action and window
	leases  map[limitSlot]durable.LimitLeaseParams // held slots
}

type limitSlot struct {
	action string
	slot   int
}

func (l *limits) init() {
	if l.config == nil {
		l.config, l.windows, l.leases = map[string]durable.Limit{}, map[string]map[int64]int{}, map[limitSlot]durable.LimitLeaseParams{}
	}
}

// LimitPut implements durable.Limiter.
func (s *Store) LimitPut(_ context.Context, p *durable.LimitPutParams) error {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	s.limits.init()
	s.limits.config[p.Limit.Action] = p.Limit
	return nil
}

// LimitDelete implements durable.Limiter.
func (s *Store) LimitDelete(_ context.Context, p *durable.LimitDeleteParams) error {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	s.limits.init()
	if _, ok := s.limits.config[p.Action]; !ok {
		return fmt.Errorf("limit of %s: %w", p.Action, durable.ErrNotFound)
	}
	delete(s.limits.config, p.Action)
	return nil
}

// LimitList implements durable.Limiter.
func (s *Store) LimitList(_ context.Context, _ *durable.LimitListParams) ([]durable.Limit, error) {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	out := make([]durable.Limit, 0, len(s.limits.config))
	for _, l := range s.limits.config {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b durable.Limit) int { return strings.Compare(a.Action, b.Action) })
	return out, nil
}

// LimitTake implements durable.Limiter.
func (s *Store) LimitTake(_ context.Context, p *durable.LimitTakeParams) error {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	s.limits.init()
	w := s.limits.windows[p.Action]
	if w == nil {
		w = map[int64]int{}
		s.limits.windows[p.Action] = w
	}
	if w[p.Window] >= p.Max {
		return fmt.Errorf("action %s, window %d: %w", p.Action, p.Window, durable.ErrLimited)
	}
	w[p.Window]++
	for old := range w {
		if old < p.Window-100 { // long over: as a TTL would delete it
			delete(w, old)
		}
	}
	return nil
}

// LimitLease implements durable.Limiter.
func (s *Store) LimitLease(_ context.Context, p *durable.LimitLeaseParams) error {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	s.limits.init()
	k := limitSlot{p.Action, p.Slot}
	if held, ok := s.limits.leases[k]; ok && held.Holder != p.Holder && !held.Until.Before(p.Now) {
		return fmt.Errorf("action %s, slot %d: %w", p.Action, p.Slot, durable.ErrLimited)
	}
	s.limits.leases[k] = *p
	return nil
}

// LimitRelease implements durable.Limiter.
func (s *Store) LimitRelease(_ context.Context, p *durable.LimitReleaseParams) error {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	k := limitSlot{p.Action, p.Slot}
	if held, ok := s.limits.leases[k]; ok && held.Holder == p.Holder {
		delete(s.limits.leases, k)
	}
	return nil
}
