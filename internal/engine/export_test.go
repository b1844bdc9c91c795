package engine

import (
	"context"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// HandleDelivery is handleDelivery for the external tests' rigs, which
// receive and handle messages one at a time as a worker does.
var HandleDelivery = handleDelivery

// GiveToCreatedChild is giveToCreatedChild, for the test of the race it
// settles.
func (c *Coordinator) GiveToCreatedChild(ctx context.Context, st *saga.State, plan *saga.Plan, d saga.Delivery, payload any) (*Delivered, error) {
	return c.giveToCreatedChild(ctx, st, plan, d, payload, "signal "+d.Signal)
}
