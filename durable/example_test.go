package durable_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// A message names the saga and the version its sender expects; every queue
// carries it in this small JSON body. Anything else is
// durable.ErrMalformedMessage, for the dead-letter queue.
func ExampleDecodeMessage() {
	body := durable.AppendMessage(nil, durable.Message{SagaID: "order-1001", Version: 3, Queue: durable.QueueAdvance, Step: "charge", Attempt: 2})
	fmt.Println(string(body))
	m, err := durable.DecodeMessage(body)
	fmt.Printf("%+v %v\n", m, err)
	_, err = durable.DecodeMessage([]byte(`{"v":1,"saga_id":"order-1001","version":0}`))
	fmt.Println(errors.Is(err, durable.ErrMalformedMessage), err)
	// Output:
	// {"v":1,"saga_id":"order-1001","version":3,"queue":"advance","step":"charge","attempt":2}
	// {SagaID:order-1001 Version:3 Queue:advance Step:charge Attempt:2 Kind: Child:0 Delay:0s} <nil>
	// true malformed message: missing version
}

// ManualClock is a durable.Clock that moves only when told: give it to a
// coordinator and a memory queue to test delays, retries and deadlines
// without waiting. Any type with a Now method is a Clock.
func ExampleManualClock() {
	clock := durable.NewManualClock(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	var c durable.Clock = clock
	fmt.Println(c.Now().Format(time.Kitchen))
	clock.Advance(90 * time.Minute)
	fmt.Println(c.Now().Format(time.Kitchen))
	// Output:
	// 9:00AM
	// 10:30AM
}
