package memqueue_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/queue/queuetest"
)

func TestConformance(t *testing.T) {
	queuetest.Exercise(t, func(t *testing.T) *queuetest.Harness {
		clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
		q := memqueue.New(memqueue.Config{Clock: clock, MaxReceives: 3, Visibility: 30 * time.Second})
		return &queuetest.Harness{
			Queue: q, Receiver: q, MaxReceives: 3,
			SendRaw: func(ctx context.Context, name durable.QueueName, body []byte) error {
				return q.SendBody(ctx, name, body, 0)
			},
			Sleep: clock.Advance,
		}
	})
}

func bodiesOf(ds []durable.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, string(d.Body))
	}
	return out
}

// Visible messages are received in the order they were sent, a delayed
// one once its delay ends, and a receive takes no more than it asks for.
func TestReceiveTakesTheEarliestSentFirst(t *testing.T) {
	ctx := context.Background()
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	q := memqueue.New(memqueue.Config{Clock: clock})
	for i, b := range []string{"m1", "m2", "m3", "m4", "m5"} {
		delay := time.Duration(0)
		if i == 1 {
			delay = 10 * time.Second
		}
		if err := q.SendBody(ctx, durable.QueueAdvance, []byte(b), delay); err != nil {
			t.Fatal(err)
		}
	}
	receive := func(max int) []string {
		ds, err := q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: max})
		if err != nil {
			t.Fatal(err)
		}
		return bodiesOf(ds)
	}
	if got := receive(2); !slices.Equal(got, []string{"m1", "m3"}) {
		t.Errorf("first receive of 2: %v, want [m1 m3]", got)
	}
	if got := receive(10); !slices.Equal(got, []string{"m4", "m5"}) {
		t.Errorf("second receive: %v, want [m4 m5]", got)
	}
	clock.Advance(11 * time.Second)
	if got := receive(10); !slices.Equal(got, []string{"m2"}) {
		t.Errorf("after the delay: %v, want [m2]", got)
	}
}

// A message received too often moves to the dead-letter queue when a
// receive meets it; the receive goes on to the next, and the queue keeps
// the rest in order.
func TestOverReceivedMessageMovesToTheDeadLetterQueue(t *testing.T) {
	ctx := context.Background()
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	q := memqueue.New(memqueue.Config{Clock: clock, MaxReceives: 1, Visibility: time.Second})
	for _, b := range []string{"a", "b", "c"} {
		if err := q.SendBody(ctx, durable.QueueAdvance, []byte(b), 0); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1})
	if err != nil || !slices.Equal(bodiesOf(ds), []string{"a"}) {
		t.Fatalf("first receive: %v, %v; want [a]", bodiesOf(ds), err)
	}
	clock.Advance(2 * time.Second) // a visible again, received once already
	ds, err = q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1})
	if err != nil || !slices.Equal(bodiesOf(ds), []string{"b"}) {
		t.Fatalf("second receive: %v, %v; want [b]", bodiesOf(ds), err)
	}
	if got := q.Bodies(durable.DeadLetter(durable.QueueAdvance)); len(got) != 1 || string(got[0]) != "a" {
		t.Errorf("dead-letter queue holds %q, want [a]", got)
	}
	if got := q.Bodies(durable.QueueAdvance); len(got) != 2 || string(got[0]) != "b" || string(got[1]) != "c" {
		t.Errorf("queue holds %q, want [b c]", got)
	}
}

// One receive of the next visible message behind 1,000 in flight (a
// worker pool's messages under way): the cost of a receive in embedded
// mode and in the engine's tests.
func BenchmarkReceiveBehindInFlight(b *testing.B) {
	ctx := context.Background()
	q := memqueue.New(memqueue.Config{Visibility: time.Hour})
	body := []byte("m")
	for range 1000 {
		_ = q.SendBody(ctx, durable.QueueAdvance, body, 0)
	}
	if ds, _ := q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10}); len(ds) != 10 {
		b.Fatal("setup")
	}
	for range 99 {
		_, _ = q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10})
	}
	p := &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1}
	b.ReportAllocs()
	for b.Loop() {
		_ = q.SendBody(ctx, durable.QueueAdvance, body, 0)
		ds, err := q.Receive(ctx, p)
		if err != nil || len(ds) != 1 {
			b.Fatal(err)
		}
		_ = q.Delete(ctx, &durable.DeleteParams{Queue: durable.QueueAdvance, ReceiptHandle: ds[0].ReceiptHandle})
	}
}
