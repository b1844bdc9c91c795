// Package expense is the example expense saga: a claim awaits a manager's
// approval, a signal, for 72 hours and escalates without one. Its Go
// actions are backed by a small in-memory fake expense service that
// honours idempotency keys, as real services should.
package expense

import (
	"context"
	_ "embed"
	"sync"

	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Definition is expense.yaml.
//
//go:embed expense.yaml
var Definition []byte

// Services is the fake expense and payroll back end.
type Services struct {
	mu      sync.Mutex
	seen    map[string]any // idempotency key -> result
	Effects []string       // every effect applied, in order, e.g. "file x-1"
}

// NewServices returns a fresh fake back end.
func NewServices() *Services { return &Services{seen: map[string]any{}} }

type claimIn struct {
	ClaimID  string `json:"claim_id"`
	Employee string `json:"employee"`
	Cents    int64  `json:"cents"`
}

// once applies effect at most once per idempotency key.
func (s *Services) once(call saga.Call, effect string, out any) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.seen[call.IdempotencyKey]; ok {
		return r, nil
	}
	s.seen[call.IdempotencyKey] = out
	s.Effects = append(s.Effects, effect)
	return out, nil
}

// Register adds the expense saga's actions to reg.
func (s *Services) Register(reg *engine.Registry) {
	reg.MustRegister("expenses.file", engine.Typed(func(ctx context.Context, c saga.Call, in claimIn) (any, error) {
		return s.once(c, "file "+in.ClaimID, map[string]any{"claim_id": in.ClaimID})
	}))
	reg.MustRegister("expenses.withdraw", engine.Typed(func(ctx context.Context, c saga.Call, in claimIn) (any, error) {
		return s.once(c, "withdraw "+in.ClaimID, nil)
	}))
	reg.MustRegister("payments.reimburse", engine.Typed(func(ctx context.Context, c saga.Call, in claimIn) (any, error) {
		return s.once(c, "reimburse "+in.ClaimID, map[string]any{"payment_id": "pay-" + in.ClaimID})
	}))
	reg.MustRegister("payments.reclaim", engine.Typed(func(ctx context.Context, c saga.Call, in claimIn) (any, error) {
		return s.once(c, "reclaim "+in.ClaimID, nil)
	}))
	reg.MustRegister("expenses.escalate", engine.Typed(func(ctx context.Context, c saga.Call, in claimIn) (any, error) {
		return s.once(c, "escalate "+in.ClaimID, map[string]any{"ticket": "fin-" + in.ClaimID})
	}))
}
