package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A service starts a saga with a Client and watches it until it is final.
// The client runs no actions: here an embedded runtime on the same store
// and queue stands in for the deployed functions (client.NewAWS reaches
// those: the table and the queue URLs are the stack's outputs).
func ExampleClient() {
	store, queue := memstore.New(), memqueue.New(memqueue.Config{})
	actions := engine.NewRegistry()
	actions.SetFallback(func(ctx context.Context, call saga.Call) (any, error) {
		return map[string]any{"id": call.Step + "-1"}, nil
	})
	workers, err := embedded.Start(embedded.Config{Actions: actions, Store: store, Queue: queue, Receiver: queue})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer workers.Close()

	c, err := client.New(client.Config{Store: store, Queue: queue})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.Start(ctx, client.StartParams{
		Definition: []byte("saga: hello\nsteps:\n  - {id: greet, action: greeter.greet, out: greeting}\n  - {id: done, succeed: {output: \"${vars.greeting.id}\"}}\n"),
		File:       "hello.yaml",
		SagaID:     "hello-1",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("started", st.SagaID, st.Status)
	for !st.Status.Final() {
		time.Sleep(5 * time.Millisecond)
		if st, err = c.Status(ctx, "hello-1"); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println(st.Status, st.Output)
	// Output:
	// started hello-1 running
	// succeeded greet-1
}
