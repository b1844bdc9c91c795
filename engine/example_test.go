package engine_test

import (
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/saga"
)

// Define a saga, compile it, advance it through its steps, and watch a
// failure compensate the completed steps in reverse order.
func Example() {
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
