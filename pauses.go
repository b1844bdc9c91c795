package lambdasaga

import (
	"context"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// PauseKind says what a pause holds: the steps of the sagas of a name,
// or the calls of an action in every saga.
type PauseKind string

const (
	PauseName   PauseKind = PauseKind(durable.PauseName)   // the steps of the sagas of a name (a child saga has its own)
	PauseAction PauseKind = PauseKind(durable.PauseAction) // the calls of an action, in any saga
)

// Pause is an operator's pause, as stored.
type Pause struct {
	Kind   PauseKind // what Target names
	Target string    // the saga name or the action
	// Until ends the pause by itself; zero: until Unpause. An expired
	// pause is listed until it is unpaused, and holds nothing.
	Until         time.Time
	Compensations bool      // it holds the compensations it matches too
	CreatedAt     time.Time // when it was made
	Active        bool      // it holds steps now (not expired)
}

// PauseOptions are the options of Client.Pause.
type PauseOptions struct {
	// Until ends the pause by itself; zero: until Unpause.
	Until time.Time
	// Compensations holds the compensations it matches too. Without it
	// they run, so a saga that fails or is cancelled undoes its steps.
	Compensations bool
}

// Pause holds the steps of the sagas named target (kind PauseName) or the
// calls of the action target (PauseAction): a worker about to run one
// sends its message again a minute later and writes nothing, spending no
// attempt, until Unpause or o.Until. A saga's deadline and a cancel still
// go through. The functions see it within 5 seconds. Pausing again
// replaces the pause. On a deployed stack it writes the pause item with
// dynamodb:UpdateItem, which the operator's policy (SagaOperatorPolicy)
// grants and the client's does not.
func (s *Client) Pause(ctx context.Context, kind PauseKind, target string, o PauseOptions) error {
	return s.coord.Pause(ctx, &engine.PauseParams{Kind: durable.PauseKind(kind), Target: target, Until: o.Until, Compensations: o.Compensations})
}

// Unpause lifts a pause: the steps it held run within a minute. An error
// wrapping durable.ErrNotFound when there is no such pause.
func (s *Client) Unpause(ctx context.Context, kind PauseKind, target string) error {
	return s.coord.Unpause(ctx, durable.PauseKind(kind), target)
}

// Pauses lists the pauses, by kind then target.
func (s *Client) Pauses(ctx context.Context) ([]Pause, error) {
	ps, err := s.coord.Pauses(ctx)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	out := make([]Pause, len(ps))
	for i, p := range ps {
		out[i] = Pause{Kind: PauseKind(p.Kind), Target: p.Target, Until: p.Until, Compensations: p.Compensations, CreatedAt: p.CreatedAt, Active: p.Active(now)}
	}
	return out, nil
}
