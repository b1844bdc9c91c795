package saga_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Compile a saga and advance it by hand, step by step, as the coordinator
// does: the third action fails for good, and the completed steps are
// compensated in reverse order. Advance is pure: no store, queue or clock.
func ExamplePlan_Advance() {
	plan, err := saga.Compile("trip.yaml", []byte(`
saga: trip
input: {city: string}
steps:
  - id: flight
    action: flights.book
    with: {to: "${input.city}"}
    out: flight
    compensate: {action: flights.cancel, with: {booking: "${vars.flight.id}"}}
  - id: hotel
    action: hotels.book
    with: {city: "${input.city}"}
    out: hotel
    compensate: {action: hotels.cancel, with: {booking: "${vars.hotel.id}"}}
  - id: car
    action: cars.rent
`), saga.Options{})

	if err != nil {
		fmt.Println(err)
		return
	}
	input, _ := plan.CheckInput(map[string]any{"city": "Lisbon"})
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	st := &saga.State{}
	_ = plan.Advance(st, saga.Event{Kind: saga.EventStart, Now: now, SagaID: "trip-1", Input: input})
	for {
		call, err := plan.Call(st, now)
		if err != nil {
			break // nothing pending: the saga is final
		}
		var out any
		var callErr error
		switch {
		case call.Action == "cars.rent":
			callErr = saga.Permanent(saga.NewError("NoCars", "sold out"))
		case !call.Compensation:
			out = map[string]any{"id": call.Step + "-42"}
		}
		fmt.Printf("%s %v\n", call.Action, call.Input)
		_ = plan.Advance(st, saga.Event{Kind: saga.EventResult, Now: now, Output: out, Err: callErr})
	}
	fmt.Println(st.Status, "after", st.Failure)
	// Output:
	// flights.book map[to:Lisbon]
	// hotels.book map[city:Lisbon]
	// cars.rent <nil>
	// hotels.cancel map[booking:hotel-42]
	// flights.cancel map[booking:flight-42]
	// compensated after step car: NoCars: sold out
}

// Compile reports every problem of a definition at once, each with its
// file, line, column, step and field, and a suggestion where one helps.
func ExampleCompile() {
	_, err := saga.Compile("order.yaml", []byte(`saga: order
input: {amount: double}
steps:
  - id: charge
    action: payments.charge
    with: {cents: "${input.amount * 100}"}
    next: shp
  - id: ship
    action: shipping.send
    with: {to: "${input.adress}"}
`), saga.Options{})
	var de *lang.DefinitionError
	if errors.As(err, &de) {
		for _, p := range de.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// order.yaml:6:35: step charge: with.cents: found no matching overload for '_*_' applied to '(double, int)' (in ${input.amount * 100})
	// order.yaml:7:5: step charge: next: no step has id "shp" (did you mean "ship"?)
	// order.yaml:8:5: step ship: unreachable: no path from the first step leads here
	// order.yaml:10:19: step ship: with.to: input has no field "adress" (declared: amount) (in ${input.adress})
}

// DryRun walks a saga without running anything: here, what a failure of
// ship would undo.
func ExamplePlan_DryRun() {
	plan, err := saga.Compile("order.yaml", []byte(`saga: order
steps:
  - {id: reserve, action: inventory.reserve, compensate: {action: inventory.release}}
  - {id: charge, action: payments.charge, compensate: {action: payments.refund}}
  - {id: ship, action: shipping.send}
`), saga.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := plan.DryRun(saga.DryRunParams{
		Act: func(call saga.Call) (any, error) {
			if call.Step == "ship" && !call.Compensation {
				return nil, saga.Permanent(saga.NewError("NoCarrier", "no carrier today"))
			}
			return map[string]any{}, nil
		},
		OnStep: func(rec saga.StepRecord) {
			if rec.Outcome != saga.OutcomeStarted {
				fmt.Println(rec.Step, rec.Outcome)
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Status)
	// Output:
	// reserve completed
	// charge completed
	// ship failed
	// charge compensated
	// reserve compensated
	// compensated
}
