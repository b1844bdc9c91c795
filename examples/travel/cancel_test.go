package travel_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/travel"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A trip cancelled while its car is being booked (the parent waits on the
// parallel fork): docs/PROTOCOL.md, "Failure and cancel": the cancel
// records a failure from outside the fork (ForkFail: the failed child is
// one past the last), cancels the running children, and "the parent
// compensates after the join". So the trip ends compensated, Cancelled,
// with every booking made cancelled, and nothing paid.
//
// The kill test found it failing: the join of a fork whose record names
// no child as failed (Failed == Children) brings neither a failure nor
// the outputs (internal/engine/fork.go join), so Plan.Advance refuses the
// EventJoin ("fork has 3 children, not 0 outputs"), every delivery of the
// join fails, it reaches the dead-letter queue, and the parent waits
// forever.
func TestTravelCancelledWhileBooking(t *testing.T) {
	svc := travel.NewServices()
	inner := engine.NewRegistry()
	svc.Register(inner)
	started, release := make(chan struct{}, 1), make(chan struct{})
	actions := engine.NewRegistry()
	for _, name := range inner.Names() {
		actions.MustRegister(name, func(ctx context.Context, c saga.Call) (any, error) {
			if name == "cars.book" {
				select {
				case started <- struct{}{}:
				default:
				}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return inner.Invoke(ctx, c)
		})
	}
	rt, err := embedded.Start(embedded.Config{Actions: actions, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: compile(t), SagaID: "t-9", Input: trip("t-9", "ann")}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("cars.book never ran")
	}
	st, err := rt.Coordinator.Cancel(ctx, "t-9")
	if err != nil {
		t.Fatalf("cancel while the car is booked: %v", err)
	}
	if cur, ok := st.Pending(); !ok || !cur.Fork || !st.CancelRequested {
		t.Fatalf("after the cancel: %s, cursor %+v, cancel requested %v; want waiting on the fork, the cancel requested", st.Status, cur, st.CancelRequested)
	}
	close(release)
	st, err = rt.Wait(ctx, "t-9")
	if err != nil {
		now, _ := rt.Coordinator.Get(context.Background(), "t-9")
		t.Fatalf("the cancelled trip did not end: %v; it is %s at version %d", err, now.Status, now.Version)
	}
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != lang.ErrorTypeCancelled {
		t.Fatalf("%s %+v, want compensated, Cancelled", st.Status, st.Failure)
	}
	eff := svc.EffectsNow()
	for _, s := range []string{"hotels", "flights", "cars"} {
		if booked := slices.Index(eff, "book "+s+" t-9"); booked >= 0 && slices.Index(eff, "cancel "+s+" t-9") < booked {
			t.Errorf("%s booked and not cancelled after: %v", s, eff)
		}
	}
	if slices.ContainsFunc(eff, func(e string) bool { return e == "authorize t-9 1234.50" }) {
		t.Errorf("paid after the cancel: %v", eff)
	}
}
