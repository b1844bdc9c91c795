package lambdasaga_test

import (
	"context"
	"fmt"

	"github.com/lambdasaga/lambdasaga"
)

// A definition deployed by name: services start its current version by
// name, without its source; a new deploy changes what later starts run.
func ExampleClient_Deploy() {
	def, err := lambdasaga.ParseDefinition("order.yaml", []byte(orderYAML))
	if err != nil {
		panic(err)
	}
	local, err := lambdasaga.NewLocal(orderActions(), lambdasaga.LocalOptions{VirtualTime: true})
	if err != nil {
		panic(err)
	}
	defer local.Close()
	ctx := context.Background()
	for range 2 {
		deployed, err := local.Deploy(ctx, def)
		if err != nil {
			panic(err)
		}
		fmt.Println(deployed[0].Name, "changed:", deployed[0].Changed)
	}
	started, err := local.StartNamed(ctx, "order", lambdasaga.StartOptions{ID: "o-1", Input: map[string]any{"order_id": "o-1", "cents": 4250, "card": "4242424242424242"}})
	if err != nil {
		panic(err)
	}
	done, err := local.Wait(ctx, started.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(done.ID, done.Status, done.Output)
	// Output:
	// order changed: true
	// order changed: false
	// o-1 succeeded map[payment:p-o-1]
}

// Signal-with-start: the first event of a saga starts it and is
// delivered to it; a retry of the call (the same SignalID) starts nothing
// and is a duplicate.
func ExampleClient_SignalWithStart() {
	def, err := lambdasaga.ParseDefinition("approval.yaml", []byte(`
saga: approval
steps:
  - id: wait
    await: {signal: approved, timeout: 1h}
    out: decision
  - id: done
    succeed: {output: "${vars.decision.by}"}
`))
	if err != nil {
		panic(err)
	}
	local, err := lambdasaga.NewLocal(lambdasaga.NewActions(), lambdasaga.LocalOptions{VirtualTime: true})
	if err != nil {
		panic(err)
	}
	defer local.Close()
	ctx := context.Background()
	o := lambdasaga.SignalWithStartOptions{
		Definition: def,
		Start:      lambdasaga.StartOptions{ID: "e-1"},
		Signal:     "approved",
		Payload:    map[string]any{"by": "mia"},
		SignalID:   "approval-e-1",
	}
	for range 2 {
		res, err := local.SignalWithStart(ctx, o)
		if err != nil {
			panic(err)
		}
		fmt.Println("started:", res.Started, "signal:", res.Delivered.Receipt)
	}
	done, err := local.Wait(ctx, "e-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(done.Status, done.Output)
	// Output:
	// started: true signal: applied
	// started: false signal: duplicate
	// succeeded mia
}
