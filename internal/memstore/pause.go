package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/lambdasaga/lambdasaga/durable"
)

var _ durable.Pauses = (*Store)(nil)

type pauseKey struct {
	kind   durable.PauseKind
	target string
}

// PausePut implements durable.Pauses.
func (s *Store) PausePut(_ context.Context, p *durable.PausePutParams) error {
	if err := p.Check(); err != nil {
		return err
	}
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if s.pauses == nil {
		s.pauses = map[pauseKey]durable.Pause{}
	}
	s.pauses[pauseKey{p.Pause.Kind, p.Pause.Target}] = p.Pause
	return nil
}

// PauseDelete implements durable.Pauses.
func (s *Store) PauseDelete(_ context.Context, p *durable.PauseDeleteParams) error {
	if err := p.Check(); err != nil {
		return err
	}
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	k := pauseKey{p.Kind, p.Target}
	if _, ok := s.pauses[k]; !ok {
		return fmt.Errorf("pause of %s %s: %w", p.Kind, p.Target, durable.ErrNotFound)
	}
	delete(s.pauses, k)
	return nil
}

// PauseList implements durable.Pauses.
func (s *Store) PauseList(_ context.Context, _ *durable.PauseListParams) ([]durable.Pause, error) {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	out := make([]durable.Pause, 0, len(s.pauses))
	for _, p := range s.pauses {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b durable.Pause) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Target, b.Target))
	})
	return out, nil
}
