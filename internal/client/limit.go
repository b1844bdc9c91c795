package client

import (
	"context"

	"github.com/lambdasaga/lambdasaga/durable"
)

// SetLimit sets an action's rate and concurrency limit, enforced by every
// worker within engine.LimitsTTL.
func (c *Client) SetLimit(ctx context.Context, l durable.Limit) error {
	return c.coord.SetLimit(ctx, l)
}

// UnsetLimit removes an action's limit: durable.ErrNotFound when it has none.
func (c *Client) UnsetLimit(ctx context.Context, action string) error {
	return c.coord.UnsetLimit(ctx, action)
}

// Limits returns every action's limit, by action name.
func (c *Client) Limits(ctx context.Context) ([]durable.Limit, error) {
	return c.coord.Limits(ctx)
}
