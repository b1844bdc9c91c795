package redrive

import (
	"context"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
)

var (
	_ DeadLetters = (*MemoryDeadLetters)(nil)
	_ Finder      = (*MemoryQueues)(nil)
)

// MemoryQueues finds the dead-letter queues of a memqueue.Queue: those of
// the advance and compensate queues (it has no start queue).
type MemoryQueues struct{ Queue *memqueue.Queue }

// Sources implements Finder.
func (f *MemoryQueues) Sources(_ context.Context, queues []Queue) ([]Source, []Queue, error) {
	var (
		out     []Source
		missing []Queue
	)
	for _, q := range asked(queues) {
		if q == Start {
			missing = append(missing, q)
			continue
		}
		out = append(out, Source{Queue: q, Letters: &MemoryDeadLetters{Queue: f.Queue, Source: durable.QueueName(q)}})
	}
	return out, missing, nil
}

// MemoryDeadLetters is the dead-letter queue of Source on a
// memqueue.Queue. Its letters have no attributes, so no reasons.
type MemoryDeadLetters struct {
	Queue  *memqueue.Queue
	Source durable.QueueName
}

func (d *MemoryDeadLetters) dlq() durable.QueueName { return durable.DeadLetter(d.Source) }

// Depth implements DeadLetters; InFlight is counted with Visible.
func (d *MemoryDeadLetters) Depth(context.Context) (Depth, error) {
	return Depth{Visible: d.Queue.Len(d.dlq())}, nil
}

// Receive implements DeadLetters.
func (d *MemoryDeadLetters) Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]Letter, error) {
	ds, err := d.Queue.Receive(ctx, &durable.ReceiveParams{Queue: d.dlq(), Max: max, Wait: wait, Visibility: visibility})
	if err != nil {
		return nil, err
	}
	letters := make([]Letter, len(ds))
	for i, m := range ds {
		letters[i] = Letter{ID: m.MessageID, Receipt: m.ReceiptHandle, Body: m.Body}
	}
	return letters, nil
}

// Return implements DeadLetters.
func (d *MemoryDeadLetters) Return(ctx context.Context, letters []Letter) ([]Letter, error) {
	for i, l := range letters {
		if err := d.Queue.SendBody(ctx, d.Source, l.Body, 0); err != nil {
			return letters[:i], err
		}
	}
	return letters, nil
}

// Delete implements DeadLetters.
func (d *MemoryDeadLetters) Delete(ctx context.Context, letters []Letter) error {
	for _, l := range letters {
		if err := d.Queue.Delete(ctx, &durable.DeleteParams{Queue: d.dlq(), ReceiptHandle: l.Receipt}); err != nil {
			return err
		}
	}
	return nil
}

// Release implements DeadLetters.
func (d *MemoryDeadLetters) Release(ctx context.Context, letters []Letter) error {
	for _, l := range letters {
		if err := d.Queue.ChangeVisibility(ctx, d.dlq(), l.Receipt, 0); err != nil {
			return err
		}
	}
	return nil
}
