package lambdasaga

import (
	"slices"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
)

// A Local's client counts its dead letters and moves them back; it has
// no start queue, and says so.
func TestLocalRedrivesItsDeadLetters(t *testing.T) {
	t.Parallel()
	l, err := NewLocal(NewActions(), LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mq := l.rt.Queue.(*memqueue.Queue)
	dlq := durable.DeadLetter(durable.QueueCompensate)
	if err := mq.SendBody(t.Context(), dlq, []byte(`{"saga_id":"gone","version":1,"queue":"compensate","step":"x","attempt":1}`), 0); err != nil {
		t.Fatal(err)
	}
	dry, err := l.Redrive(t.Context(), RedriveOptions{DryRun: true})
	if err != nil || dry.Moved != 0 || len(dry.Queues) != 2 || dry.Queues[1].DeadLetters != 1 || !slices.Equal(dry.NotFound, []string{"start"}) {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	res, err := l.Redrive(t.Context(), RedriveOptions{Queues: []string{"compensate"}})
	if err != nil || res.Moved != 1 || len(res.Queues) != 1 || res.Queues[0].Moved != 1 || mq.Len(dlq) != 0 {
		t.Fatalf("redrive: %+v, %v; %d dead letters left", res, err, mq.Len(dlq))
	}
	if _, err := l.Redrive(t.Context(), RedriveOptions{Queues: []string{"nosuch"}}); err == nil {
		t.Error("an unknown queue was taken")
	}
}
