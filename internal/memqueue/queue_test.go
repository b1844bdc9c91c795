package memqueue_test

import (
	"context"
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
