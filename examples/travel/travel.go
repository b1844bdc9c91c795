// Package travel is the example travel saga: a hotel, a flight and a car
// booked in parallel (the ones booked are cancelled when another cannot
// be), a payment by a child saga, and a ticket per traveller, five at a
// time. Its Go actions are backed by small in-memory fake services that
// honour idempotency keys, as real services should.
package travel

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sync"

	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Definition is travel.yaml; Payment is payment.yaml, its child saga.
var (
	//go:embed travel.yaml
	Definition []byte
	//go:embed payment.yaml
	Payment []byte
)

// Services is the fake back end: hotels, flights, cars, payments and
// tickets.
type Services struct {
	// SoldOut names the services ("hotels", "flights", "cars") that
	// refuse every booking, for good.
	SoldOut map[string]bool
	// NoTicket names the travellers whose ticket cannot be issued, for
	// good.
	NoTicket map[string]bool

	mu      sync.Mutex
	seen    map[string]any // idempotency key -> result
	Effects []string       // every effect applied, in order, e.g. "book hotels t-1"
}

// NewServices returns a fresh fake back end with everything available.
func NewServices() *Services {
	return &Services{seen: map[string]any{}, SoldOut: map[string]bool{}, NoTicket: map[string]bool{}}
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

// EffectsNow returns a copy of the effects applied so far.
func (s *Services) EffectsNow() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.Effects...)
}

type tripIn struct {
	TripID string `json:"trip_id"`
	City   string `json:"city"`
	To     string `json:"to"`
}

type paymentIn struct {
	OrderID string  `json:"order_id"`
	Amount  float64 `json:"amount"`
}

type ticketIn struct {
	TripID string `json:"trip_id"`
	Name   string `json:"name"`
	Seat   int    `json:"seat"`
	To     string `json:"to"`
}

// Register adds the travel and payment sagas' actions to reg.
func (s *Services) Register(reg *engine.Registry) {
	for _, svc := range []string{"hotels", "flights", "cars"} {
		reg.MustRegister(svc+".book", engine.Typed(func(ctx context.Context, c saga.Call, in tripIn) (any, error) {
			if s.SoldOut[svc] {
				return nil, saga.Permanent(errors.New(svc + ": sold out"))
			}
			return s.once(c, "book "+svc+" "+in.TripID, map[string]any{"booking": svc + "-" + in.TripID, "trip_id": in.TripID, "to": in.To})
		}))
		reg.MustRegister(svc+".cancel", engine.Typed(func(ctx context.Context, c saga.Call, in tripIn) (any, error) {
			return s.once(c, "cancel "+svc+" "+in.TripID, nil)
		}))
	}
	reg.MustRegister("payments.authorize", engine.Typed(func(ctx context.Context, c saga.Call, in paymentIn) (any, error) {
		return s.once(c, fmt.Sprintf("authorize %s %.2f", in.OrderID, in.Amount), map[string]any{"order_id": in.OrderID, "amount": in.Amount})
	}))
	reg.MustRegister("payments.void", engine.Typed(func(ctx context.Context, c saga.Call, in paymentIn) (any, error) {
		return s.once(c, "void "+in.OrderID, nil)
	}))
	reg.MustRegister("payments.capture", engine.Typed(func(ctx context.Context, c saga.Call, in paymentIn) (any, error) {
		return s.once(c, fmt.Sprintf("capture %s %.2f", in.OrderID, in.Amount), map[string]any{"order_id": in.OrderID, "amount": in.Amount})
	}))
	reg.MustRegister("payments.refund", engine.Typed(func(ctx context.Context, c saga.Call, in paymentIn) (any, error) {
		return s.once(c, fmt.Sprintf("refund %s %.2f", in.OrderID, in.Amount), nil)
	}))
	reg.MustRegister("tickets.issue", engine.Typed(func(ctx context.Context, c saga.Call, in ticketIn) (any, error) {
		if s.NoTicket[in.Name] {
			return nil, saga.Permanent(errors.New("no ticket for " + in.Name))
		}
		id := fmt.Sprintf("tk-%s-%d", in.TripID, in.Seat)
		return s.once(c, "issue "+id+" "+in.Name, map[string]any{"id": id, "trip_id": in.TripID, "seat": in.Seat, "to": in.To})
	}))
	reg.MustRegister("tickets.void", engine.Typed(func(ctx context.Context, c saga.Call, in ticketIn) (any, error) {
		return s.once(c, fmt.Sprintf("void tk-%s-%d", in.TripID, in.Seat), nil)
	}))
}
