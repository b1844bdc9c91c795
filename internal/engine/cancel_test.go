package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A cancel that lands while an action runs, waits for its retry, or is
// about to be retried: the action's outcome is recorded once, the action
// never runs twice side by side, and what succeeded is compensated.

func TestCancelWhileAnActionRuns(t *testing.T) {
	t.Parallel()
	// The cancel lands while charge runs; charge then answers. The service
	// answers a repeated key differently (Declined): the first answer must
	// be the one recorded, never lost to the cancel's write and asked again;
	// a success is compensated, a failure is not retried; nothing after
	// charge runs.
	tests := []struct {
		name   string
		answer func() (any, error)
		calls  string
	}{
		{"success", func() (any, error) { return map[string]any{"id": "p"}, nil },
			"reserve charge charge.compensate reserve.compensate"},
		{"success too large to store", func() (any, error) {
			return map[string]any{"id": "p", "pad": strings.Repeat("x", saga.MaxStateBytes)}, nil
		}, "reserve charge charge.compensate reserve.compensate"},
		{"retryable failure", func() (any, error) { return nil, errors.New("busy") },
			"reserve reserve.compensate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			charges := 0
			var e *rig
			e = newEdgeRig(t, bigOutputSaga, func(ctx context.Context, c saga.Call) (any, error) {
				if c.Step == "charge" && !c.Compensation {
					if charges++; charges > 1 {
						return nil, saga.Permanent(saga.NewError("Declined", "asked twice"))
					}
					if _, err := e.coord.Cancel(context.Background(), c.SagaID); err != nil {
						return nil, err
					}
					return tt.answer()
				}
				return map[string]any{"id": c.Step + "-1"}, nil
			})
			e.start("s-1", map[string]any{"blob": "b"})
			e.drain()
			if charges != 1 {
				t.Fatalf("charge called %d times, want once", charges)
			}
			e.ended(t, "s-1", durable.StatusCompensated, lang.ErrorTypeCancelled, "", tt.calls)
		})
	}
}

// A cancel that lands while an action runs does not put that attempt's
// message where a second worker would take it at once and run the action
// again beside the first: the message already in flight is the one that
// runs it, at the cancel's version.
func TestCancelDuringActionStartsNoSecondRun(t *testing.T) {
	t.Parallel()
	charges := 0
	var e *rig
	e = newEdgeRig(t, bigOutputSaga, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "charge" && !c.Compensation {
			if charges++; charges > 1 {
				return nil, saga.Permanent(saga.NewError("Declined", "asked twice"))
			}
			if _, err := e.coord.Cancel(context.Background(), c.SagaID); err != nil {
				return nil, err
			}
			// Another worker polls at once, as a second Lambda would.
			if ds, _ := e.q.Receive(context.Background(), &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10}); len(ds) != 0 {
				t.Errorf("the cancel made the charge's message visible at once: %d message(s)", len(ds))
			}
			return map[string]any{"id": "p"}, nil
		}
		return map[string]any{"id": c.Step + "-1"}, nil
	})
	e.start("s-1", map[string]any{"blob": "b"})
	e.drain()
	if charges != 1 {
		t.Fatalf("charge ran %d times", charges)
	}
	e.checkCompensated(t, "reserve", "charge")
}

// The message of an attempt that a cancel keeps pending still runs it when
// it arrives after the cancel (its worker crashed, or it had not been
// received yet): the cancel waits for exactly that attempt.
func TestAttemptMessageRunsAfterTheCancelThatWaitsForIt(t *testing.T) {
	t.Parallel()
	e := newEdgeRig(t, bigOutputSaga, nil).stepByStep()
	e.start("s-1", map[string]any{"blob": "b"})
	d, _ := e.receive() // reserve
	if _, err := e.coord.Handle(context.Background(), d.Body); err != nil {
		t.Fatal(err)
	}
	d, _ = e.receive() // charge, not yet handled
	if _, err := e.coord.Cancel(context.Background(), "s-1"); err != nil {
		t.Fatal(err)
	}
	if out, err := e.coord.Handle(context.Background(), d.Body); err != nil || out != engine.HandledStep {
		t.Fatalf("the charge's message after the cancel: %s %v, want it run", out, err)
	}
	e.drain()
	e.checkCompensated(t, "reserve", "charge")
}

// A cancel within the clock-skew margin of the retry's due time waits for
// that attempt, which another worker's clock may already have started: it
// does not compensate at once.
func TestCancelNearTheRetryTimeWaitsForTheAttempt(t *testing.T) {
	t.Parallel()
	src := `
saga: r
steps:
  - {id: pay, action: x.pay, retry: {attempts: 3, backoff: 10m, max_backoff: 15m, jitter: false}, compensate: {action: x.refund}}
`
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if !c.Compensation {
			return nil, errors.New("busy")
		}
		return nil, nil
	})
	e.start("s-1", nil)
	d, _ := e.receive() // the first attempt fails: a retry in 10 minutes
	engine.HandleDelivery(context.Background(), e.coord, e.q, d, nil)
	e.clock.Advance(10*time.Minute - 3*time.Second) // 3 s before it is due
	st, err := e.coord.Cancel(context.Background(), "s-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusRunning || !st.CancelRequested {
		t.Fatalf("a cancel 3 s before the retry is due: %s, requested %v; want it to wait for the attempt", st.Status, st.CancelRequested)
	}
}

func TestCancelDuringBackoffCompensatesAtOnce(t *testing.T) {
	t.Parallel()
	src := `
saga: r
steps:
  - {id: a, action: x.a, compensate: {action: x.undo}}
  - {id: pay, action: x.pay, retry: {attempts: 3, backoff: 10m, max_backoff: 15m}, compensate: {action: x.refund}}
`
	payCalls := 0
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "pay" && !c.Compensation {
			payCalls++
			return nil, errors.New("busy")
		}
		return nil, nil
	})
	e.start("s-1", nil)
	for range 2 { // a, then pay's first attempt (fails, retry in 10m)
		d, _ := e.receive()
		engine.HandleDelivery(context.Background(), e.coord, e.q, d, nil)
	}
	st, err := e.coord.Cancel(context.Background(), "s-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != durable.StatusCompensating || st.CancelRequested {
		t.Fatalf("after a cancel during the backoff: %s requested %v, want compensating at once", st.Status, st.CancelRequested)
	}
	e.drain()
	if st := e.get("s-1"); st.Status != durable.StatusCompensated || payCalls != 1 {
		t.Fatalf("status %s, pay called %d times, want compensated with no new attempt", st.Status, payCalls)
	}
	e.checkCompensated(t, "a")
}
