package main

import (
	"context"

	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
)

// newHandler wires the stock advance function. It registers no Go actions:
// sagas it runs use lambda:<function> actions. To run Go actions, build
// your own function that registers them (see examples/order/cmd/orderfn).
func newHandler(ctx context.Context) (*sqshandler.Handler, error) {
	return sqshandler.FromEnvironment(ctx, engine.NewRegistry())
}
