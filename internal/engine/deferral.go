package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// deferStep puts off the attempt msg carries, as a timer not due yet is
// put off (fire): the same message (version, step, attempt) goes out
// again with delay, and nothing is written. The attempt is not spent: its
// number and idempotency key stay, and the saga's version does not move,
// so a transition from elsewhere (a cancel, a signal) drops or takes over
// the copy as it would the original.
func (c *Coordinator) deferStep(ctx context.Context, msg durable.Message, st *saga.State, delay time.Duration) error {
	again := msg
	again.Delay = min(max(delay, time.Second), durable.MaxDelay)
	if err := c.send(ctx, []durable.Message{again}); err != nil {
		return fmt.Errorf("saga %s: deferring %s attempt %d, sending it again: %w", st.SagaID, msg.Step, msg.Attempt, err)
	}
	return nil
}
