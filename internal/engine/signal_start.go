package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// SignalWithStartParams starts a saga unless it exists, and signals it
// either way (Coordinator.SignalWithStart).
type SignalWithStartParams struct {
	Start StartParams // the saga to start if it does not exist; its SagaID is required
	// Signal is the signal to deliver. Its SagaID is empty or the
	// Start's. Give it an ID: a retry of the call then delivers it once
	// (without one, each call sends a signal of its own).
	Signal SignalParams
}

// SignalWithStartResult says what a signal-with-start did.
type SignalWithStartResult struct {
	// Started: this call created the saga. A retry of a call that created
	// it, or a call that lost the race to create it, reports false.
	Started bool
	// Delivered is what became of the signal; nil when it was not
	// delivered (the call failed).
	Delivered *Delivered
}

// SignalWithStart starts the saga Start describes unless a saga of its id
// exists, and delivers Signal to it either way, as Signal does. A saga
// that exists is signalled as it is: Start's definition and input are not
// looked at, nor compared with the saga's (a Start that differs is not
// ErrExists, as it is for Start).
//
// It is idempotent under retry, by the saga id and the signal's ID: a
// call that failed part way (the saga created but its first message not
// sent, or the signal not delivered) is finished by calling it again with
// the same params, and a repeat of one that succeeded starts nothing and
// delivers the signal as a duplicate. Concurrent calls for one id start
// the saga once: the one whose create lands starts it, the others signal
// it. On an error after the saga was created, the result says Started.
func (c *Coordinator) SignalWithStart(ctx context.Context, p *SignalWithStartParams) (*SignalWithStartResult, error) {
	id := p.Start.SagaID
	if id == "" {
		return nil, errors.New("signal-with-start: a saga id is required")
	}
	if err := checkSagaID(id); err != nil {
		return nil, err
	}
	if p.Signal.SagaID != "" && p.Signal.SagaID != id {
		return nil, fmt.Errorf("signal-with-start %s: the signal is for saga %s: it goes to the saga started", id, p.Signal.SagaID)
	}
	if err := checkSignal(&p.Signal, c.offloadBytes()); err != nil {
		// Refused before the start: a signal that cannot be delivered
		// must not leave a saga started without it.
		return nil, fmt.Errorf("signal-with-start %s: signal %s: %w", id, p.Signal.Name, err)
	}
	res := &SignalWithStartResult{}
	// Read first: a saga that exists (the common case of a stream of
	// signals) costs a read, not a create that loses its condition, which
	// DynamoDB bills as a write of the stored item.
	rec, err := c.cfg.Store.SagaGet(ctx, &durable.SagaGetParams{SagaID: id})
	switch {
	case errors.Is(err, durable.ErrNotFound):
		// The plan is resolved once: the one checked is the one started.
		start := p.Start
		if start.Plan, err = c.startPlan(ctx, &start); err != nil {
			return res, fmt.Errorf("signal-with-start: %w", err)
		}
		if !start.Plan.TakesSignal(p.Signal.Name) {
			// No run of it could ever take the signal: starting it would
			// leave a saga without the signal it was started for.
			return res, fmt.Errorf("signal-with-start %s: %w: saga %s has no await of signal %s, in its own steps or in any fork's (branches, iterations, child sagas): nothing started",
				id, saga.ErrNotReceiving, start.Plan.Name(), p.Signal.Name)
		}
		if _, res.Started, err = c.start(ctx, &start, true); err != nil {
			return res, fmt.Errorf("signal-with-start: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("signal-with-start %s: %w", id, err)
	case rec.Version == 1:
		// A call before this one may have created it and failed before
		// its first message was sent.
		if err := c.resendFirst(ctx, rec); err != nil {
			return nil, fmt.Errorf("signal-with-start %s: re-send first message: %w", id, err)
		}
	}
	sig := p.Signal
	sig.SagaID = id
	if res.Delivered, err = c.Signal(ctx, &sig); err != nil {
		return res, fmt.Errorf("signal-with-start %s: %w", id, err)
	}
	return res, nil
}

// resendFirst sends again the outbox of rec, a saga at its first version.
func (c *Coordinator) resendFirst(ctx context.Context, rec *durable.SagaRecord) error {
	st := &saga.State{}
	refs, err := st.UnmarshalBinaryRefs(rec.State)
	if err != nil {
		return fmt.Errorf("saga %s: %w", rec.SagaID, err)
	}
	// Its launches copy the saga's values into its children: values, not
	// the references the state holds to them.
	if err := c.hydrate(ctx, st, refs); err != nil {
		return err
	}
	plan, err := c.cfg.Plans.Get(ctx, st.DefinitionHash)
	if err != nil {
		return fmt.Errorf("saga %s: %w", rec.SagaID, err)
	}
	return c.resendOutbox(ctx, st, plan)
}

// checkSignal refuses what Signal would refuse of a signal by itself,
// whatever the saga: its name, id or payload.
func checkSignal(p *SignalParams, offloadBytes int) error {
	v, size, err := plainJSON(p.Payload)
	if err != nil {
		return fmt.Errorf("%w: payload: %w", saga.ErrBadDelivery, err)
	}
	return saga.CheckDeliveryWithin(&saga.Delivery{Signal: p.Name, ID: p.ID, Payload: v}, size, offloadBytes)
}
