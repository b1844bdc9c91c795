package travel_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/travel"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// The car is sold out, so the parallel bookings fail and the hotel and the
// flight, booked, are undone: the flight first (the highest index), whose
// cancellation fails for good, so the flight's branch parks
// (compensation_failed) and the trip with it. An operator fixes the
// flight service and resumes: the trip must then cancel the hotel too,
// and end compensated only with both bookings cancelled (docs/STATES.md:
// compensated means every completed step was undone).
//
// Failing: the trip's cursor while it undoes a failed fork's children
// holds the children still to undo (State.UndoNext); a parked child
// clears the cursor (internal/saga/fork.go childUndone), and a failed fork is not
// on the compensation stack, so the resume goes on with the steps before
// the fork and never undoes the hotel: the trip ends compensated with the
// hotel booked. Resumed without the flight's branch being resumed first,
// it also ends compensated with the flight still booked.
func TestTravelResumeAfterAParkedBranchUndoesTheOthers(t *testing.T) {
	for _, resumeBranch := range []bool{true, false} {
		name := "resume the trip only"
		if resumeBranch {
			name = "resume the flight's branch, then the trip"
		}
		t.Run(name, func(t *testing.T) {
			svc := travel.NewServices()
			svc.SoldOut["cars"] = true
			inner := engine.NewRegistry()
			svc.Register(inner)
			var stuck atomic.Bool
			stuck.Store(true)
			actions := engine.NewRegistry()
			for _, name := range inner.Names() {
				actions.MustRegister(name, func(ctx context.Context, c saga.Call) (any, error) {
					if name == "flights.cancel" && stuck.Load() {
						return nil, saga.Permanent(saga.NewError("Unavailable", "the flight service is down"))
					}
					if name == "cars.book" {
						// Fail once the hotel and the flight are booked, so
						// both are undone.
						for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
							eff := svc.EffectsNow()
							if slices.Contains(eff, "book hotels t-p") && slices.Contains(eff, "book flights t-p") {
								break
							}
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
			st, err := rt.Run(ctx, &engine.StartParams{Plan: compile(t), SagaID: "t-p", Input: trip("t-p", "ann")})
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != durable.StatusCompensationFailed {
				t.Fatalf("%s %+v, want compensation_failed: the flight's branch parked", st.Status, st.CompensationError)
			}
			flight := durable.ChildID("t-p", "book", 1, 1)
			stuck.Store(false)
			if resumeBranch {
				if _, err := rt.Coordinator.Resume(ctx, flight); err != nil {
					t.Fatal(err)
				}
				if ch, err := rt.Wait(ctx, flight); err != nil || ch.Status != durable.StatusCompensated {
					t.Fatalf("the flight's branch after its resume: %v, %v", ch, err)
				}
			}
			// The branch's end reaches the trip, parked on it: the trip goes
			// on by itself, and a resume of it finds nothing parked.
			if _, err := rt.Coordinator.Resume(ctx, "t-p"); err != nil && !(resumeBranch && errors.Is(err, saga.ErrInvalidEvent)) {
				t.Fatal(err)
			}
			st, err = rt.Wait(ctx, "t-p")
			if err != nil {
				t.Fatal(err)
			}
			eff := svc.EffectsNow()
			if st.Status == durable.StatusCompensated {
				for _, s := range []string{"hotels", "flights"} {
					if !slices.Contains(eff, "cancel "+s+" t-p") {
						t.Errorf("the trip ended compensated with its %s booked: %v", s, eff)
					}
				}
			} else if !resumeBranch && st.Status != durable.StatusCompensationFailed {
				t.Errorf("the trip ended %s, want compensated or parked again", st.Status)
			}
		})
	}
}
