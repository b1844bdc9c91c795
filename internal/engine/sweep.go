package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// DefaultMaxResends is how many times, by default, a sweep sends one
// version's outbox again before it leaves the saga for an operator.
const DefaultMaxResends = 3

// SweepParams say which sagas a sweep picks up.
type SweepParams struct {
	// IdleFor: sagas not updated for at least this long are picked up.
	// Choose it above the longest retry delay (15 minutes at most), so that
	// sagas merely waiting for a delayed message are left alone; re-sending
	// to them anyway is harmless, just wasted requests.
	IdleFor time.Duration
	// MaxResends is how many times the sweep sends the outbox of one
	// version again. A saga still idle after that many is left for an
	// operator (its message keeps failing: it went to a dead-letter queue
	// each time): counted in SweepResult.LeftForOperator and logged, not
	// sent again until it moves. 0 means DefaultMaxResends; negative is
	// refused.
	MaxResends int
}

// SweepResult counts what a sweep did.
type SweepResult struct {
	// Checked counts the sagas read: those in their status since before
	// now minus IdleFor. A saga that moves along is not read until it has
	// been in one status that long.
	Checked int
	Resent  int // sagas whose outbox was sent again
	// LeftForOperator counts the idle sagas not sent again because their
	// outbox already was MaxResends times at this version.
	LeftForOperator int
	// Paused counts the idle sagas not sent again because their next step
	// is paused: their message comes back by itself (docs/PROTOCOL.md,
	// "Pauses"), and a copy would only double what the deferral costs.
	Paused int
}

// Sweep re-sends the stored outbox of every unfinished saga idle for
// IdleFor or longer, at most MaxResends times per version. It closes the
// one window the protocol leaves to its callers: a Start, Cancel or Resume
// whose write landed but whose send did not, when the caller never
// retries; and it sends again the message of a saga whose message went to
// a dead-letter queue (throttling for minutes, say). Sending an outbox
// again is always safe: the protocol drops what it has already handled.
//
// It reads only the sagas that have been in their status for IdleFor or
// longer (durable.SagaListParams.EnteredBefore), and of those re-sends only
// the ones not updated for IdleFor. Each re-send is claimed on the saga
// (durable.Store.SagaSetResends, a compare-and-set of the count) before it
// is sent, so concurrent sweeps send it once, and given back if the send
// fails; the next transition clears the count. A saga whose message keeps failing therefore goes to
// the dead-letter queue MaxResends times more, then is left for an
// operator, logged at WARN on every sweep until it moves.
//
// Run it now and then (sagactl sweep, or a schedule). A saga it cannot read
// or send for is logged and skipped, so one damaged item does not keep the
// sweep from the rest; the errors are returned together at the end. Only a
// failed listing stops it.
func (c *Coordinator) Sweep(ctx context.Context, p *SweepParams) (*SweepResult, error) {
	maxResends := p.MaxResends
	switch {
	case maxResends < 0:
		return nil, fmt.Errorf("sweep: MaxResends %d: must be 0 (the default, %d) or more", maxResends, DefaultMaxResends)
	case maxResends == 0:
		maxResends = DefaultMaxResends
	}
	res := &SweepResult{}
	var errs []error
	skip := func(sagaID string, err error) {
		errs = append(errs, fmt.Errorf("sweep: saga %s: %w", sagaID, err))
		c.log.LogAttrs(ctx, slog.LevelError, "sweep skipped a saga", slog.String("saga_id", sagaID), slog.String("error", err.Error()))
	}
	now := c.cfg.Clock.Now()
	idleSince := now.Add(-p.IdleFor)
	// Held too: a hold's timer (hold_for, the deadline) is its outbox,
	// which a callback's completer may have failed to send.
	for _, status := range []durable.Status{durable.StatusRunning, durable.StatusWaiting, durable.StatusHeld, durable.StatusCompensating} {
		cursor := ""
		for {
			page, err := c.cfg.Store.SagaList(ctx, &durable.SagaListParams{Status: status, Limit: 100, Cursor: cursor, EnteredBefore: idleSince.Add(1)})
			if err != nil {
				return res, errors.Join(append(errs, fmt.Errorf("sweep: %w", err))...)
			}
			for _, sm := range page.Sagas {
				res.Checked++
				st, err := c.Get(ctx, sm.SagaID)
				if err != nil {
					skip(sm.SagaID, err)
					continue
				}
				if cur, ok := st.Pending(); ok && cur.Fork && !cur.Compensating && !st.Status.Final() {
					// It waits on its children, which no listing shows:
					// the sweep looks at each lane's current one.
					if err := c.sweepFork(ctx, st, idleSince, 0, maxResends, res); err != nil {
						skip(st.SagaID, err)
					}
					continue
				}
				if st.Status.Final() || len(st.Outbox) == 0 || st.UpdatedAt.After(idleSince) {
					continue // finished, or it moved on since it entered its status
				}
				if _, paused, _ := c.PausedBy(ctx, st); paused {
					res.Paused++
					continue
				}
				idle := slog.Duration("idle", now.Sub(st.UpdatedAt))
				if st.Resends >= maxResends {
					res.LeftForOperator++
					c.log.LogAttrs(ctx, slog.LevelWarn, "sweep left a saga for an operator", slog.String("saga_id", st.SagaID),
						slog.Uint64("version", st.Version), slog.String("status", string(st.Status)), idle, slog.Int("resends", st.Resends))
					continue
				}
				// Claim the re-send (the count as read, plus one), so that
				// sweeps running at once send it once; give it back if the
				// send fails, so that trouble sending does not use up the
				// re-sends of a saga whose message never left.
				claim := &durable.SagaSetResendsParams{SagaID: st.SagaID, Version: st.Version, From: st.Resends, To: st.Resends + 1}
				err = c.cfg.Store.SagaSetResends(ctx, claim)
				if errors.Is(err, durable.ErrConflict) {
					continue // it moved on since it was read, or another sweep took it
				}
				if err == nil {
					if err = c.resend(ctx, st); err != nil {
						back := &durable.SagaSetResendsParams{SagaID: st.SagaID, Version: st.Version, From: claim.To, To: claim.From}
						if berr := c.cfg.Store.SagaSetResends(ctx, back); berr != nil && !errors.Is(berr, durable.ErrConflict) {
							err = fmt.Errorf("%w (and the re-send stays counted: %w)", err, berr)
						}
					}
				}
				if err != nil {
					skip(st.SagaID, err)
					continue
				}
				res.Resent++
				c.log.LogAttrs(ctx, slog.LevelInfo, "sweep re-sent outbox", slog.String("saga_id", st.SagaID),
					slog.Uint64("version", st.Version), slog.String("status", string(st.Status)), idle, slog.Int("resends", st.Resends+1))
			}
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
	}
	return res, errors.Join(errs...)
}
