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
// 15 minutes. A timer whose own message was sent by the transition that set
// it (due within 15 minutes of it) is left to that message, and a process
// sends each timer once however often it ticks. Ticks of other processes
// (another Lambda instance, a tick retried) may still send a copy: the
// protocol handles it as any duplicate (rule 3 re-sends the next version's
// outbox; a later one is dropped). Run it every minute (the
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
			switch {
			case wake.IsZero() || !ok || wake.Sub(now) > ahead:
				continue // it moved on, or its timer moved away, since it was listed
			case wake.Sub(st.UpdatedAt) <= durable.MaxDelay:
				continue // the transition that set it sent its message, delayed
			case !c.tickOnce(st.SagaID, st.Version, wake, now):
				continue // an earlier tick of this process sent it
			}
			step, _ := plan.Awaits(cur)
			msg := durable.Message{SagaID: st.SagaID, Version: st.Version, Queue: durable.QueueAdvance, Step: step, Attempt: cur.Attempt, Delay: min(max(wake.Sub(now), 0), durable.MaxDelay)}
			if err := c.send(ctx, []durable.Message{msg}); err != nil {
				c.untick(st.SagaID, st.Version)
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

// tickOnce records that this process sends the timer of saga id at
// version, due at wake, and reports whether it had not already; entries a
// while past due are forgotten.
func (c *Coordinator) tickOnce(id string, version uint64, wake, now time.Time) bool {
	c.tickedMu.Lock()
	defer c.tickedMu.Unlock()
	if c.ticked == nil {
		c.ticked = map[tickedTimer]time.Time{}
	}
	for k, due := range c.ticked {
		if now.Sub(due) > 2*durable.MaxDelay {
			delete(c.ticked, k)
		}
	}
	k := tickedTimer{id, version}
	if _, sent := c.ticked[k]; sent {
		return false
	}
	c.ticked[k] = wake
	return true
}

// untick forgets a timer whose message could not be sent.
func (c *Coordinator) untick(id string, version uint64) {
	c.tickedMu.Lock()
	delete(c.ticked, tickedTimer{id, version})
	c.tickedMu.Unlock()
}
