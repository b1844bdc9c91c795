package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A transition is one durable step of a saga that exists: the event that
// advances the state read, the conditional write of the next version, what
// to do when that write loses to another writer, and the replay of a
// transition whose result can never be stored. Every transition goes
// through commit, then publish: an action's outcome and a timer (handle.go),
// a join and a child's undo (fork_join.go, fork_undo.go), a cancel or a
// resume (coordinator.go), a signal or a callback (receive.go). A saga's
// first version is made by first (Start, and a fork's launch).
//
// What names the saga is held apart, in a subject: the escape analysis
// follows a struct as a whole, and a saga id that goes into an error would
// take the transition's closures to the heap with it.
type transition struct {
	// advance applies the event to st. limit is saga.MaxStateBytes when the
	// transition is replayed measuring, else 0 (saga.Event.StoreLimit).
	advance func(st *saga.State, limit int) error
	// write stores st conditionally on the version base; nil: c.write,
	// with the step events of the commit's h.
	write func(ctx context.Context, st *saga.State, base uint64) error
	// onConflict, when set, is asked after a lost write whether the
	// transition still applies to the saga as the winners left it: the
	// state just read and the version to write on. Nil, or false: commit
	// returns the conflict, and its caller decides (most retry the whole
	// message, reading it again).
	onConflict func(ctx context.Context, base uint64) (*saga.State, uint64, bool)
	// reread reads the saga for a replay after a write that could never be
	// stored, and returns the state and version the replay writes on, or
	// durable.ErrConflict when the transition no longer applies. Nil: the
	// saga must still be at base (c.rereadAt).
	reread func(ctx context.Context, base uint64) (*saga.State, uint64, error)
}

// subject is the saga a transition advances.
type subject struct {
	sagaID string
	step   string     // named in the log line of a transition that cannot be stored
	plan   *saga.Plan // the saga's
}

// commit advances st, read at version base, by t and writes it: see
// transition. s names the saga; h holds the step events t's advance hears, reported once
// written (nil: none are heard); it is not a field of t, so that t's
// closures stay on the stack. It returns the state it wrote.
func (c *Coordinator) commit(ctx context.Context, s *subject, t *transition, h *heard, st *saga.State, base uint64) (*saga.State, error) {
	err := c.advanceWrite(ctx, t, h, st, base, 0)
	return c.settle(ctx, s, t, h, st, base, err)
}

// settle finishes a transition whose first write, of st on base, returned
// err: the lost write tried again where t.onConflict allows, the
// unstorable one replayed measuring. It returns the state written.
func (c *Coordinator) settle(ctx context.Context, s *subject, t *transition, h *heard, st *saga.State, base uint64, err error) (*saga.State, error) {
	// A write that did not land may have put objects (record) that the
	// version written in its place no longer refers to: the saga keeps
	// the mark that it has objects, so that they are marked with its tree
	// when it ends, never left to no expiry at all.
	put := st.Objects
	for range c.cfg.MaxConflictRetries {
		if t.onConflict == nil || !errors.Is(err, durable.ErrConflict) {
			break
		}
		st2, base2, ok := t.onConflict(ctx, base)
		if !ok {
			break
		}
		st, base = st2, base2
		st.Objects = st.Objects || put
		err = c.advanceWrite(ctx, t, h, st, base, 0)
		put = put || st.Objects
	}
	if !unstorable(err) {
		return st, err
	}
	// The transition can never be stored (too large, too deep). Replay it
	// on the saga read again, measuring the state after each step: the
	// step that made it too large fails in a state that can be stored, and
	// an action that succeeded stays on the compensation stack, so the saga
	// compensates it rather than retrying forever.
	cause := err
	reread := t.reread
	if reread == nil {
		reread = func(ctx context.Context, base uint64) (*saga.State, uint64, error) {
			return c.rereadAt(ctx, s.sagaID, base)
		}
	}
	if st, base, err = reread(ctx, base); err != nil {
		return nil, err
	}
	st.Objects = st.Objects || put
	err = c.advanceWrite(ctx, t, h, st, base, saga.MaxStateBytes)
	if unstorable(err) {
		red := s.plan.Redactor(st)
		c.log.LogAttrs(ctx, slog.LevelError, "transition cannot be stored even after failing its step",
			slog.String("saga_id", s.sagaID), slog.String("step", s.step), slog.Uint64("version", base),
			slog.String("cause", red.Text(cause.Error())), slog.String("error", red.Text(err.Error())))
	}
	return st, err
}

// advanceWrite applies t's event to st and writes it on base.
func (c *Coordinator) advanceWrite(ctx context.Context, t *transition, h *heard, st *saga.State, base uint64, limit int) error {
	if err := t.advance(st, limit); err != nil {
		return err
	}
	if t.write != nil {
		return t.write(ctx, st, base)
	}
	return c.write(ctx, st, base, h)
}

// rereadAt reads saga id for a replay that must apply to the version
// base: durable.ErrConflict when it has moved on.
func (c *Coordinator) rereadAt(ctx context.Context, id string, base uint64) (*saga.State, uint64, error) {
	_, st, _, err := c.load(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if st.Version != base {
		return nil, 0, fmt.Errorf("saga %s: %w", id, durable.ErrConflict)
	}
	return st, base, nil
}

// publish sends the outbox of st, which a transition has just written.
func (c *Coordinator) publish(ctx context.Context, st *saga.State, plan *saga.Plan) error {
	if err := c.sendOutbox(ctx, st, plan); err != nil {
		return fmt.Errorf("saga %s: version %d written, outbox not sent: %w", st.SagaID, st.Version, err)
	}
	return nil
}

// first makes the first version of a saga: advance applies EventStart to
// a new state (limit as in transition.advance), which is encoded for
// SagaCreate. A state that can never be stored is made again measuring,
// so the saga fails in one that can be.
func (c *Coordinator) first(ctx context.Context, advance func(st *saga.State, limit int) error, trace saga.TraceContext) (*saga.State, durable.SagaRecord, error) {
	build := func(limit int) (*saga.State, durable.SagaRecord, error) {
		st := &saga.State{Trace: trace}
		if err := advance(st, limit); err != nil {
			return nil, durable.SagaRecord{}, err
		}
		rec, err := c.record(ctx, st, nil)
		return st, rec, err
	}
	st, rec, err := build(0)
	if unstorable(err) {
		st, rec, err = build(saga.MaxStateBytes)
	}
	return st, rec, err
}

// create writes a saga's first version, made by first; its step events,
// held in h, are reported as write reports a transition's.
func (c *Coordinator) create(ctx context.Context, id string, rec durable.SagaRecord, h *heard) error {
	c.writing(id)
	err := c.cfg.Store.SagaCreate(ctx, &durable.SagaCreateParams{Record: rec})
	if mayBeWritten(err) {
		h.report()
	}
	c.heardAll(id)
	return err
}
