package expense_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/expense"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Test a saga that awaits a signal for 72 hours, in milliseconds: on a
// manual clock, the embedded runtime holds virtual time while a saga
// waits on a signal, so the test sees it waiting and approves it; a claim
// nobody answers escalates once the test waits for it to end, and the 72
// hours pass at once.
func Example() {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := durable.NewManualClock(start)
	svc := expense.NewServices()
	actions := engine.NewRegistry()
	svc.Register(actions)
	rt, err := embedded.Start(embedded.Config{Actions: actions, Workers: 1, Clock: clock})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	plan, err := saga.Compile("expense.yaml", expense.Definition, saga.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	show := func(st *saga.State) {
		out, _ := json.Marshal(st.Output)
		fmt.Printf("%s %s after %s: %s\n", st.SagaID, st.Status, clock.Now().Sub(start), out)
	}

	// The manager approves the first claim while it awaits.
	claim := map[string]any{"claim_id": "x-1", "employee": "ada", "cents": 4250}
	if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: plan, SagaID: "x-1", Input: claim}); err != nil {
		fmt.Println(err)
		return
	}
	st, err := rt.WaitReceiving(ctx, "x-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("x-1", st.Status)
	d, err := rt.Signal(ctx, "x-1", "approved", map[string]any{"approved": true, "by": "maria"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("signal approved:", d.Receipt)
	if st, err = rt.Wait(ctx, "x-1"); err != nil {
		fmt.Println(err)
		return
	}
	show(st)

	// Nobody answers the second: it escalates after 72 hours.
	began := time.Now()
	claim = map[string]any{"claim_id": "x-2", "employee": "bo", "cents": 990}
	if st, err = rt.Run(ctx, &engine.StartParams{Plan: plan, SagaID: "x-2", Input: claim}); err != nil {
		fmt.Println(err)
		return
	}
	show(st)
	fmt.Println("in under a second of real time:", time.Since(began) < time.Second)
	fmt.Println(svc.Effects)
	// Output:
	// x-1 waiting
	// signal approved: applied
	// x-1 succeeded after 0s: {"approved_by":"maria","claim_id":"x-1","outcome":"paid"}
	// x-2 succeeded after 72h0m0s: {"claim_id":"x-2","outcome":"escalated"}
	// in under a second of real time: true
	// [file x-1 reimburse x-1 file x-2 escalate x-2]
}
