package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// sendOutbox sends st's outbox, just written: its queue messages, and the
// launches only whoever holds st can do.
func (c *Coordinator) sendOutbox(ctx context.Context, st *saga.State, plan *saga.Plan) error {
	return c.sendLaunching(ctx, st, plan, c.launch)
}

// resendOutbox sends st's outbox again (rule 3, a repeated cancel or
// resume, the sweep): its children were most likely launched the first
// time, and each launch starts by looking for its child (relaunch).
func (c *Coordinator) resendOutbox(ctx context.Context, st *saga.State, plan *saga.Plan) error {
	return c.sendLaunching(ctx, st, plan, func(ctx context.Context, st *saga.State, plan *saga.Plan, k int, _ bool) error {
		return c.relaunch(ctx, st, plan, k)
	})
}

func (c *Coordinator) sendLaunching(ctx context.Context, st *saga.State, plan *saga.Plan, launch func(context.Context, *saga.State, *saga.Plan, int, bool) error) error {
	if err := c.send(ctx, st.Outbox); err != nil {
		return err
	}
	var errs []error // one child's trouble does not keep the others from starting
	for _, m := range st.Outbox {
		if m.Kind == durable.KindLaunch {
			if err := launch(ctx, st, plan, m.Child, false); err != nil {
				errs = append(errs, fmt.Errorf("launch child %d of %s: %w", m.Child, m.Step, err))
			}
		}
	}
	return errors.Join(errs...)
}

// resend sends st's outbox again, loading its plan when a launch needs
// it.
func (c *Coordinator) resend(ctx context.Context, st *saga.State) error {
	if !hasForkWork(st.Outbox) {
		return c.send(ctx, st.Outbox)
	}
	plan, err := c.cfg.Plans.Get(ctx, st.DefinitionHash)
	if err != nil {
		return err
	}
	return c.resendOutbox(ctx, st, plan)
}

// hasForkWork reports whether an outbox holds launches, which its sender
// does itself rather than queue.
func hasForkWork(msgs []durable.Message) bool {
	for _, m := range msgs {
		if m.Kind == durable.KindLaunch {
			return true
		}
	}
	return false
}

// forkWork returns the launches of an outbox.
func forkWork(msgs []durable.Message) []durable.Message {
	var out []durable.Message
	for _, m := range msgs {
		if m.Kind == durable.KindLaunch {
			out = append(out, m)
		}
	}
	return out
}

func (c *Coordinator) send(ctx context.Context, msgs []durable.Message) error {
	if hasForkWork(msgs) {
		// Launches are done by sendOutbox, never queued.
		msgs = slices.DeleteFunc(slices.Clone(msgs), func(m durable.Message) bool {
			return m.Kind == durable.KindLaunch
		})
	}
	if len(msgs) == 0 {
		return nil
	}
	return c.cfg.Queue.Send(ctx, msgs)
}
