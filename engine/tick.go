package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// DefaultTickAhead is how far ahead, by default, a tick sends the
// messages of timers: the scheduled function runs every minute, so each
// timer gets its message within a minute of being due, delayed to the
// second.
const DefaultTickAhead = time.Minute

// TickParams say which timers a tick fires.
type TickParams struct {
	// Ahead: timers due before now plus Ahead get their message, delayed
	// until they are due. Run Tick at least this often. 0 means
	// DefaultTickAhead; at most durable.MaxDelay.
	Ahead time.Duration
}

// TickResult counts what a tick did.
type TickResult struct {
	Due  int // timers due within Ahead
	Sent int // of them, messages sent (a saga that moved on since is skipped)
}

// Tick sends the message of every saga timer due within p.Ahead
// (durable.Store.SagaListDue), delayed until it is due: how a wait longer
// than a queue's delay (15 minutes) comes back, and a waiting saga's
// deadline. A wait costs one message however long it is, not one every
// 15 minutes. A timer may get its message from more than one tick (a tick
// runs every minute, a timer may be listed twice); the copies are dropped
// by version once the first has fired it. Run it every minute (the
// template's TickFunction, sagactl tick, the embedded runtime). A saga it
// cannot read or send for is logged and skipped; the errors are returned
// together at the end.
func (c *Coordinator) Tick(ctx context.Context, p *TickParams) (*TickResult, error) {
	ahead := p.Ahead
	switch {
	case ahead < 0 || ahead > durable.MaxDelay:
		return nil, fmt.Errorf("tick: Ahead %s: must be 0 (the default, %s) to %s", ahead, DefaultTickAhead, durable.MaxDelay)
	case ahead == 0:
		ahead = DefaultTickAhead
	}
	now := c.cfg.Clock.Now()
	res := &TickResult{}
	var errs []error
	skip := func(sagaID string, err error) {
		errs = append(errs, fmt.Errorf("tick: saga %s: %w", sagaID, err))
		c.log.LogAttrs(ctx, slog.LevelError, "tick skipped a saga", slog.String("saga_id", sagaID), slog.String("error", err.Error()))
	}
	cursor := ""
	for {
		page, err := c.cfg.Store.SagaListDue(ctx, &durable.SagaListDueParams{Before: now.Add(ahead), Limit: 100, Cursor: cursor})
		if err != nil {
			return res, errors.Join(append(errs, fmt.Errorf("tick: %w", err))...)
		}
		for _, due := range page.Sagas {
			res.Due++
			_, st, plan, err := c.load(ctx, due.SagaID)
			if err != nil {
				skip(due.SagaID, err)
				continue
			}
			wake := st.WakeAt()
			cur, ok := st.Pending()
			if wake.IsZero() || !ok {
				continue // it moved on since it was listed
			}
			step, _ := plan.Awaits(cur)
			msg := durable.Message{SagaID: st.SagaID, Version: st.Version, Queue: durable.QueueAdvance, Step: step, Attempt: cur.Attempt, Delay: max(wake.Sub(now), 0)}
			if err := c.send(ctx, []durable.Message{msg}); err != nil {
				skip(st.SagaID, err)
				continue
			}
			res.Sent++
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if res.Sent > 0 {
		c.log.LogAttrs(ctx, slog.LevelInfo, "tick sent due timers", slog.Int("due", res.Due), slog.Int("sent", res.Sent), slog.Duration("ahead", ahead))
	}
	return res, errors.Join(errs...)
}
