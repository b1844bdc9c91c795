package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// SweepParams say which sagas a sweep picks up.
type SweepParams struct {
	// IdleFor: sagas not updated for at least this long are picked up.
	// Choose it above the longest retry delay (15 minutes at most), so that
	// sagas merely waiting for a delayed message are left alone; re-sending
	// to them anyway is harmless, just wasted requests.
	IdleFor time.Duration
}

// SweepResult counts what a sweep did.
type SweepResult struct {
	Checked int // unfinished sagas looked at
	Resent  int // sagas whose outbox was sent again
}

// Sweep re-sends the stored outbox of every unfinished saga idle for
// IdleFor or longer. It closes the one window the protocol leaves to its
// callers: a Start, Cancel or Resume whose write landed but whose send did
// not, when the caller never retries. Sending an outbox again is always
// safe: the protocol drops what it has already handled. Run it now and then
// (sagactl sweep, or a schedule). A saga it cannot read or send for is
// logged and skipped, so one damaged item does not keep the sweep from the
// rest; the errors are returned together at the end. Only a failed listing
// stops it.
func (c *Coordinator) Sweep(ctx context.Context, p *SweepParams) (*SweepResult, error) {
	res := &SweepResult{}
	var errs []error
	skip := func(sagaID string, err error) {
		errs = append(errs, fmt.Errorf("sweep: saga %s: %w", sagaID, err))
		c.log.LogAttrs(ctx, slog.LevelError, "sweep skipped a saga", slog.String("saga_id", sagaID), slog.String("error", err.Error()))
	}
	now := c.cfg.Clock.Now()
	for _, status := range []durable.Status{durable.StatusRunning, durable.StatusWaiting, durable.StatusCompensating} {
		cursor := ""
		for {
			page, err := c.cfg.Store.SagaList(ctx, &durable.SagaListParams{Status: status, Limit: 100, Cursor: cursor})
			if err != nil {
				return res, errors.Join(append(errs, fmt.Errorf("sweep: %w", err))...)
			}
			for _, sm := range page.Sagas {
				res.Checked++
				if now.Sub(sm.UpdatedAt) < p.IdleFor {
					continue
				}
				st, err := c.Get(ctx, sm.SagaID)
				if err != nil {
					skip(sm.SagaID, err)
					continue
				}
				if st.Status.Final() || len(st.Outbox) == 0 {
					continue
				}
				if err := c.send(ctx, st.Outbox); err != nil {
					skip(st.SagaID, err)
					continue
				}
				res.Resent++
				c.log.LogAttrs(ctx, slog.LevelInfo, "sweep re-sent outbox", slog.String("saga_id", st.SagaID),
					slog.Uint64("version", st.Version), slog.String("status", string(st.Status)), slog.Duration("idle", now.Sub(sm.UpdatedAt)))
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
	}
	return res, errors.Join(errs...)
}
