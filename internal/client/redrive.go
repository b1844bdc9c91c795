package client

import (
	"context"
	"errors"

	"github.com/lambdasaga/lambdasaga/internal/redrive"
)

// RedriveParams says which dead letters Redrive moves back, and how.
type RedriveParams struct {
	// Queues are the queues whose dead letters move; none: all.
	Queues []redrive.Queue
	redrive.Params
}

// Redrive moves the dead letters of the queues p names back to them
// (redrive.Redrive), or with p.DryRun counts them. Result.Missing names
// the queues asked for that the client knows no dead-letter queue of (a
// stack's start queue when it was not given StartQueueURL). The error is
// that of finding the queues, or joins those of the queues that stopped
// early; the result says what moved either way.
func (c *Client) Redrive(ctx context.Context, p *RedriveParams) (*redrive.Result, error) {
	if c.deadLetters == nil {
		return nil, errors.New("redrive: this client knows no dead-letter queues")
	}
	return redrive.RedriveFound(ctx, c.deadLetters, p.Queues, p.Params)
}
