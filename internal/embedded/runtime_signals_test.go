package embedded_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Two sagas on one manual clock: A awaits a signal the
// test has not sent yet; B first waits an hour (a timer), then awaits.
// WaitReceiving(B) promises to return once B waits on its signal, without
// passing any await's timeout. But the runtime holds virtual time for as
// long as any saga awaits and no one is in Wait, so B's one-hour timer
// never fires: WaitReceiving(B) hangs until its context ends, though
// moving the clock one hour would pass nothing A waits on (its timeout is
// 72 hours away). The same holds for B's retry delays.
func TestWaitReceivingIsNotHeldByAnotherSagasAwait(t *testing.T) {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := durable.NewManualClock(start)
	actions := engine.NewRegistry()
	actions.SetFallback(func(ctx context.Context, call saga.Call) (any, error) {
		return map[string]any{"id": "claim-" + call.SagaID}, nil
	})
	rt, err := embedded.Start(embedded.Config{Actions: actions, Workers: 1, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	later, err := saga.Compile("later.yaml", []byte("saga: later\nsteps:\n  - {id: cool, wait: {for: 1h}}\n  - {id: approval, await: {signal: approved, timeout: 72h}}\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: compile(t, "expense.yaml"), SagaID: "a", Input: map[string]any{"amount": 10}}); err != nil {
		t.Fatal(err)
	}
	if st, err := rt.WaitReceiving(ctx, "a"); err != nil || st.Status != durable.StatusWaiting {
		t.Fatalf("a: %v %v", st, err)
	}
	if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: later, SagaID: "b"}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	defer wcancel()
	st, err := rt.WaitReceiving(wctx, "b")
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReceiving(b) hung: b stays %s on its 1h wait, virtual time held at +%s because saga a awaits a signal", st.Status, clock.Now().Sub(start))
	}
	if err != nil {
		t.Fatal(err)
	}
	if cur, _ := st.Pending(); st.Status != durable.StatusWaiting || cur.Step != 1 {
		t.Fatalf("b: %s at step %d, want waiting on its await (step 1)", st.Status, cur.Step)
	}
	a, err := rt.Coordinator.Get(ctx, "a")
	if err != nil || a.Status != durable.StatusWaiting {
		t.Fatalf("a let time pass its await's timeout: %v %v", a, err)
	}
}

// A signal sent through a closed runtime:
// nothing will ever run the saga again, so it is refused (ErrClosed),
// rather than taken as if the runtime ran.
func TestSignalAfterCloseIsRefused(t *testing.T) {
	actions := engine.NewRegistry()
	actions.SetFallback(func(ctx context.Context, call saga.Call) (any, error) { return map[string]any{"id": "x"}, nil })
	rt, err := embedded.Start(embedded.Config{Actions: actions, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: compile(t, "expense.yaml"), SagaID: "e-1", Input: map[string]any{"amount": 10}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.WaitReceiving(ctx, "e-1"); err != nil {
		t.Fatal(err)
	}
	rt.Close()
	d, err := rt.Signal(ctx, "e-1", "approved", map[string]any{"by": "ann"})
	if err == nil {
		t.Fatalf("a signal through a closed runtime was %s; nothing will run the saga", d.Receipt)
	}
}
