// Package order is the example order saga: its definition and Go actions
// backed by small in-memory fake services (inventory, payments, shipping)
// that honour idempotency keys, as real services should.
package order

import (
	"context"
	_ "embed"
	"sync"

	"github.com/lambdasaga/lambdasaga"
)

// Definition is order.yaml.
//
//go:embed order.yaml
var Definition []byte

// WebhookDefinition is order-webhook.yaml: the order saga whose charge
// waits for the payment provider's webhook (a callback step).
//
//go:embed order-webhook.yaml
var WebhookDefinition []byte

// DeclinedCard is the card number the fake payment service always declines.
const DeclinedCard = "4000000000000002"

// OutOfStock is the item the fake inventory never has.
const OutOfStock = "unobtainium"

// Unshippable is the customer the fake shipping service cannot deliver to.
const Unshippable = "nowhere"

// Services are the fake back ends. Each remembers the result of every
// idempotency key, so a redelivered call applies its effect once.
type Services struct {
	mu       sync.Mutex
	seen     map[string]any // idempotency key -> result
	Reserved map[string][]string
	Charged  map[string]int64 // order id -> cents
	Shipped  map[string]bool
	Effects  []string // every effect applied, in order, e.g. "charge o-1"
	// Pending holds the callback token of each charge the fake payment
	// provider was asked for and has not answered, by order id: its
	// webhook completes the token (or fails it, declined).
	Pending   map[string]string
	callCount int
}

// NewServices returns fresh fake services.
func NewServices() *Services {
	return &Services{seen: map[string]any{}, Reserved: map[string][]string{}, Charged: map[string]int64{}, Shipped: map[string]bool{}, Pending: map[string]string{}}
}

// Calls counts every action call, duplicates included.
func (s *Services) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.callCount
}

// once applies effect at most once per idempotency key.
func (s *Services) once(call lambdasaga.Call, effect func() (any, error)) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.callCount++
	if r, ok := s.seen[call.IdempotencyKey]; ok {
		return r, nil
	}
	r, err := effect()
	if err == nil {
		s.seen[call.IdempotencyKey] = r
	}
	return r, err
}

type reserveIn struct {
	OrderID string   `json:"order_id"`
	Items   []string `json:"items"`
}

type chargeIn struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Card        string `json:"card"`
}

type shipIn struct {
	OrderID  string   `json:"order_id"`
	Customer string   `json:"customer"`
	Items    []string `json:"items"`
}

type orderRef struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

// Register adds the order saga's actions to actions.
func (s *Services) Register(actions *lambdasaga.Actions) {
	actions.MustRegister("inventory.reserve", lambdasaga.Typed(func(ctx context.Context, c lambdasaga.Call, in reserveIn) (any, error) {
		return s.once(c, func() (any, error) {
			for _, it := range in.Items {
				if it == OutOfStock {
					return nil, lambdasaga.Permanent(lambdasaga.NewError("OutOfStock", it+" is out of stock"))
				}
			}
			s.Reserved[in.OrderID] = in.Items
			s.Effects = append(s.Effects, "reserve "+in.OrderID)
			return map[string]any{"order_id": in.OrderID, "reservation_id": "r-" + in.OrderID}, nil
		})
	}))
	actions.MustRegister("inventory.release", lambdasaga.Typed(func(ctx context.Context, c lambdasaga.Call, in orderRef) (any, error) {
		return s.once(c, func() (any, error) {
			delete(s.Reserved, in.OrderID)
			s.Effects = append(s.Effects, "release "+in.OrderID)
			return nil, nil
		})
	}))
	actions.MustRegister("payments.charge", lambdasaga.Typed(func(ctx context.Context, c lambdasaga.Call, in chargeIn) (any, error) {
		return s.once(c, func() (any, error) {
			if in.Card == DeclinedCard {
				return nil, lambdasaga.NewError("CardDeclined", "the card was declined")
			}
			s.Charged[in.OrderID] += in.AmountCents
			s.Effects = append(s.Effects, "charge "+in.OrderID)
			return map[string]any{"order_id": in.OrderID, "payment_id": "p-" + in.OrderID, "amount_cents": in.AmountCents, "status": "captured"}, nil
		})
	}))
	// The provider of order-webhook.yaml: the request returns at once, the
	// payment pending; the provider answers later through the token.
	actions.MustRegister("payments.request_charge", lambdasaga.Typed(func(ctx context.Context, c lambdasaga.Call, in chargeIn) (any, error) {
		r, err := s.once(c, func() (any, error) {
			s.Charged[in.OrderID] += in.AmountCents
			s.Effects = append(s.Effects, "request-charge "+in.OrderID)
			return map[string]any{"order_id": in.OrderID, "payment_id": "p-" + in.OrderID, "amount_cents": in.AmountCents, "status": "pending"}, nil
		})
		if err == nil {
			s.mu.Lock()
			s.Pending[in.OrderID] = c.CallbackToken // a retry's new token replaces the old
			s.mu.Unlock()
		}
		return r, err
	}))
	actions.MustRegister("payments.refund", lambdasaga.Typed(func(ctx context.Context, c lambdasaga.Call, in orderRef) (any, error) {
		return s.once(c, func() (any, error) {
			// Charges made by another process (another Lambda instance) are
			// not in this one's memory: refund what is known, record the rest.
			s.Charged[in.OrderID] = max(0, s.Charged[in.OrderID]-in.AmountCents)
			s.Effects = append(s.Effects, "refund "+in.OrderID)
			return nil, nil
		})
	}))
	actions.MustRegister("shipping.create", lambdasaga.Typed(func(ctx context.Context, c lambdasaga.Call, in shipIn) (any, error) {
		return s.once(c, func() (any, error) {
			if in.Customer == Unshippable {
				return nil, lambdasaga.Permanent(lambdasaga.NewError("Unshippable", "no carrier delivers to "+in.Customer))
			}
			s.Shipped[in.OrderID] = true
			s.Effects = append(s.Effects, "ship "+in.OrderID)
			return map[string]any{"order_id": in.OrderID, "shipment_id": "s-" + in.OrderID}, nil
		})
	}))
	actions.MustRegister("shipping.cancel", lambdasaga.Typed(func(ctx context.Context, c lambdasaga.Call, in orderRef) (any, error) {
		return s.once(c, func() (any, error) {
			delete(s.Shipped, in.OrderID)
			s.Effects = append(s.Effects, "cancel-shipment "+in.OrderID)
			return nil, nil
		})
	}))
}
