package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// An invocation's time: an action's context ends saga.ResultReserve
// before the invocation's deadline, so its outcome is always written and
// sent; a message with too little time left for its step is handed back,
// unless no invocation could give it more.

func TestActionRunningIntoTheInvocationDeadlineIsRecorded(t *testing.T) {
	t.Parallel()
	src := `
saga: slow
steps:
  - id: first
    action: a.first
    compensate: {action: a.undo}
  - id: slow
    action: a.slow
    timeout: 1s
    retry: {attempts: 2, backoff: 1s}
`
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "slow" {
			<-ctx.Done() // runs until it is stopped
			return nil, ctx.Err()
		}
		return nil, nil
	}).stepByStep()
	e.start("s-1", nil)
	d, _ := e.receive()
	engine.HandleDelivery(context.Background(), e.coord, e.q, d, nil) // first
	d, _ = e.receive()
	ctx, cancel := context.WithTimeout(context.Background(), saga.ResultReserve+200*time.Millisecond)
	defer cancel()
	if _, err := e.coord.Handle(ctx, d.Body); err != nil {
		t.Fatalf("the attempt cut off by the deadline was not recorded: %v", err)
	}
	st := e.get("s-1")
	if cur, ok := st.Pending(); !ok || cur.Attempt != 2 {
		t.Fatalf("after the cut-off attempt: %+v, want attempt 2 pending", st.Cursors)
	}
	e.drain()
	st = e.get("s-1")
	if st.Status != durable.StatusCompensated || st.Failure.Type != lang.ErrorTypeTimeout {
		t.Fatalf("status %s failure %+v, want compensated after Timeout", st.Status, st.Failure)
	}
	e.checkCompensated(t, "first")
}

func TestNoTimeLeftHandsTheMessageBack(t *testing.T) {
	t.Parallel()
	ran := false
	e := newEdgeRig(t, bigOutputSaga, func(ctx context.Context, c saga.Call) (any, error) { ran = true; return nil, nil })
	e.start("s-1", map[string]any{"blob": "b"})
	d, _ := e.receive()
	ctx, cancel := context.WithTimeout(context.Background(), saga.ResultReserve/2)
	defer cancel()
	if _, err := e.coord.Handle(ctx, d.Body); err == nil || ran {
		t.Fatalf("with less than ResultReserve left: err %v, action ran %v; want the message handed back unrun", err, ran)
	}
	if st := e.get("s-1"); st.Version != 1 {
		t.Fatalf("version %d, want 1 (nothing written)", st.Version)
	}
}

func TestStepTimeoutThatNoLongerFitsIsHandedBack(t *testing.T) {
	t.Parallel()
	src := `
saga: t
steps:
  - {id: a, action: x.a, timeout: 1s}
`
	ran := 0
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) { ran++; return nil, nil })
	e.start("s-1", nil)
	d, _ := e.receive()
	// 2.5 s left of an invocation that had 10 s: the 1 s step and the 2 s
	// reserve do not fit, but they would in a fresh invocation.
	ctx, cancel := context.WithTimeout(engine.WithInvocationBudget(context.Background(), 10*time.Second), 2500*time.Millisecond)
	defer cancel()
	if _, err := e.coord.Handle(ctx, d.Body); !errors.Is(err, engine.ErrNoTime) || ran != 0 {
		t.Fatalf("err %v, ran %d: want the record handed back unrun", err, ran)
	}
	// The same time left in an invocation that never had more: run it.
	ctx2, cancel2 := context.WithTimeout(engine.WithInvocationBudget(context.Background(), 2500*time.Millisecond), 2500*time.Millisecond)
	defer cancel2()
	if _, err := e.coord.Handle(ctx2, d.Body); err != nil || ran != 1 {
		t.Fatalf("err %v, ran %d: want it run, as no invocation could give more", err, ran)
	}
	// HandBack sends the message again, at once.
	msg, _ := durable.DecodeMessage(d.Body)
	before := e.queue.sent.Load()
	if err := e.coord.HandBack(context.Background(), msg); err != nil || e.queue.sent.Load() != before+1 {
		t.Fatalf("hand back: %v, sent %d", err, e.queue.sent.Load()-before)
	}
}

func TestAFreshInvocationNeverHandsBack(t *testing.T) {
	t.Parallel()
	// A step whose timeout and the reserve all but fill a fresh invocation:
	// what is left after loading is a few microseconds short. Handing it
	// back would hand it back again forever; it must run.
	src := `
saga: t
steps:
  - {id: a, action: x.a, timeout: 1s}
`
	ran := 0
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) { ran++; return nil, nil })
	e.start("s-1", nil)
	d, _ := e.receive()
	budget := time.Second + saga.ResultReserve
	ctx, cancel := context.WithTimeout(engine.WithInvocationBudget(context.Background(), budget), budget)
	defer cancel()
	if _, err := e.coord.Handle(ctx, d.Body); err != nil || ran != 1 {
		t.Fatalf("err %v, ran %d: a fresh invocation must run the step", err, ran)
	}
}

// The action's context ends saga.ResultReserve before the invocation's
// deadline, so its outcome is always written and sent; a step timeout that
// comes first ends it instead. (The test of an action running into the
// invocation's deadline is cut by its own step timeout, so an action
// given the whole invocation would pass it: this one checks the
// deadline itself.)
func TestActionContextEndsBeforeTheInvocation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, timeout string
		want          func(invocation time.Time) time.Time
	}{
		{"untimed step", "", func(inv time.Time) time.Time { return inv.Add(-saga.ResultReserve) }},
		{"step timeout later than the reserve", ", timeout: 15m", func(inv time.Time) time.Time { return inv.Add(-saga.ResultReserve) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got time.Time
			e := newEdgeRig(t, "saga: t\nsteps:\n  - {id: a, action: x.a"+tc.timeout+"}\n", func(ctx context.Context, c saga.Call) (any, error) {
				got, _ = ctx.Deadline()
				return nil, nil
			})
			e.start("s-1", nil)
			d, _ := e.receive()
			inv := time.Now().Add(20 * time.Second)
			ctx, cancel := context.WithDeadline(context.Background(), inv)
			defer cancel()
			if _, err := e.coord.Handle(ctx, d.Body); err != nil {
				t.Fatal(err)
			}
			if want := tc.want(inv); !got.Equal(want) {
				t.Fatalf("the action's deadline is %s before the invocation's, want %s", inv.Sub(got), inv.Sub(want))
			}
		})
	}
	// A step timeout before the reserve ends the action at the timeout.
	var left time.Duration
	e := newEdgeRig(t, "saga: t\nsteps:\n  - {id: a, action: x.a, timeout: 3s}\n", func(ctx context.Context, c saga.Call) (any, error) {
		dl, _ := ctx.Deadline()
		left = time.Until(dl)
		return nil, nil
	})
	e.start("s-1", nil)
	d, _ := e.receive()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.coord.Handle(ctx, d.Body); err != nil {
		t.Fatal(err)
	}
	if left <= 2*time.Second || left > 3*time.Second {
		t.Fatalf("a 3 s step in a 20 s invocation got %s", left)
	}
}
