package lambdasaga

import (
	"context"

	"github.com/lambdasaga/lambdasaga/durable"
)

// Limit bounds how often, and how many at once, an action is called
// across every saga and every worker, its compensations included. A call
// over it is deferred (its message comes again a second or two later, no
// attempt spent), never failed; docs/PROTOCOL.md, "Limits".
type Limit struct {
	Action string // the action's name, as definitions write it
	// Rate is calls per second (at most 500); 0: none.
	Rate int
	// Burst is how many calls may start in one window of Burst/Rate
	// seconds; 0: a tenth of Rate, at least 1. Any T seconds see at most
	// Rate*T + Burst calls start.
	Burst int
	// Concurrency is the calls in flight at once (at most 100); 0: none.
	Concurrency int
}

// SetLimit sets an action's limit, replacing any it had. Every worker
// enforces it within 5 seconds.
func (s *Client) SetLimit(ctx context.Context, l Limit) error {
	return s.coord.SetLimit(ctx, durable.Limit(l))
}

// UnsetLimit removes an action's limit; an error wrapping
// durable.ErrNotFound when it has none.
func (s *Client) UnsetLimit(ctx context.Context, action string) error {
	return s.coord.UnsetLimit(ctx, action)
}

// Limits returns every action's limit, by action name.
func (s *Client) Limits(ctx context.Context) ([]Limit, error) {
	ls, err := s.coord.Limits(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Limit, len(ls))
	for i, l := range ls {
		out[i] = Limit(l)
	}
	return out, nil
}
