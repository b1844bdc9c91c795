package main

import (
	"context"

	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

// newHandler wires the stock compensate function: the same handler as
// advance, on its own queue, so compensation keeps its own concurrency,
// timeout and dead-letter queue. Compensation actions are lambda:<function>
// actions here; a function with Go compensations registers them.
func newHandler(ctx context.Context) (*sqshandler.Handler, error) {
	return sqshandler.FromEnvironment(ctx, engine.NewRegistry())
}
