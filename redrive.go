package lambdasaga

import (
	"context"
	"errors"

	"github.com/lambdasaga/lambdasaga/internal/redrive"
)

// RedriveOptions says which dead letters Redrive moves back.
type RedriveOptions struct {
	// Queues names the queues whose dead letters move: "advance",
	// "compensate", "start"; none: all.
	Queues []string
	// Max bounds the letters moved over all queues; 0: all.
	Max int
	// DryRun counts the dead letters and moves none.
	DryRun bool
	// IncludeRefused moves the start queue's refused requests too; they
	// stay by default, since most are refused again.
	IncludeRefused bool
}

// RedriveResult is what Redrive did.
type RedriveResult struct {
	Moved  int            // over all queues
	Queues []QueueRedrive // in the order advance, compensate, start
	// NotFound names the queues asked for whose dead letters the client
	// does not know (the start queue without ClientConfig.StartQueueURL).
	NotFound []string
}

// QueueRedrive is what Redrive did to one queue's dead letters.
type QueueRedrive struct {
	Queue       string // advance, compensate or start
	DeadLetters int    // in the dead-letter queue when the redrive began
	InFlight    int    // received by someone then, not yet deleted
	Moved       int    // now back on the queue
	RefusedLeft int    // refused start requests left in the dead-letter queue
	// Reasons counts the refusal reasons of the letters seen, most
	// frequent first.
	Reasons []RefusalReason
	// ByMoveTask: SQS moved them with a message move task.
	ByMoveTask bool
	// Err is why this queue's redrive stopped early; Moved says what it
	// moved before.
	Err error
}

// RefusalReason is how many dead letters gave one refusal reason.
type RefusalReason struct {
	Reason string // the request's lambdasaga-reason attribute
	Count  int    // letters that gave it
}

// Redrive moves the dead letters of the client's queues back to them,
// once their cause is fixed (docs/DEPLOY.md, "Redriving dead letters"):
// by SQS's message move task where it serves, else each letter sent
// back before it is deleted, so a crash delivers one twice and loses
// none (the sagas drop the copy). The caller needs what
// SagaOperatorPolicy grants. The error joins those of the queues that
// stopped early; the result says what moved either way.
func (s *Client) Redrive(ctx context.Context, o RedriveOptions) (*RedriveResult, error) {
	if s.deadLetters == nil {
		return nil, errors.New("redrive: this client knows no dead-letter queues (NewClient or NewLocal make one that does)")
	}
	var queues []redrive.Queue
	for _, name := range o.Queues {
		q, err := redrive.ParseQueue(name)
		if err != nil {
			return nil, err
		}
		queues = append(queues, q)
	}
	res, err := redrive.RedriveFound(ctx, s.deadLetters, queues, redrive.Params{Max: o.Max, DryRun: o.DryRun, IncludeRefused: o.IncludeRefused})
	if res == nil {
		return nil, err
	}
	out := &RedriveResult{Moved: res.Moved}
	for _, q := range res.Missing {
		out.NotFound = append(out.NotFound, string(q))
	}
	for _, q := range res.Queues {
		qr := QueueRedrive{Queue: string(q.Queue), DeadLetters: q.Before.Visible, InFlight: q.Before.InFlight, Moved: q.Moved, RefusedLeft: q.Skipped, ByMoveTask: q.ByTask, Err: q.Err}
		for _, r := range q.Reasons {
			qr.Reasons = append(qr.Reasons, RefusalReason(r))
		}
		out.Queues = append(out.Queues, qr)
	}
	return out, err
}
