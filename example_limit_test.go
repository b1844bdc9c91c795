package lambdasaga_test

import (
	"context"
	"fmt"

	"github.com/lambdasaga/lambdasaga"
)

// An operator bounds the calls of an action, across every saga and
// worker: 50 a second, 5 at once. A call over it waits a second or two
// and runs then; it never fails for it.
func ExampleClient_SetLimit() {
	ctx := context.Background()
	local, err := lambdasaga.NewLocal(orderActions(), lambdasaga.LocalOptions{})
	if err != nil {
		panic(err)
	}
	defer local.Close()
	if err := local.SetLimit(ctx, lambdasaga.Limit{Action: "payments.charge", Rate: 50, Concurrency: 5}); err != nil {
		panic(err)
	}
	fmt.Println(local.SetLimit(ctx, lambdasaga.Limit{Action: "payments.charge", Rate: 5000}))
	limits, err := local.Limits(ctx)
	if err != nil {
		panic(err)
	}
	for _, l := range limits {
		fmt.Printf("%s: %d/s, burst %d, %d at once\n", l.Action, l.Rate, l.Burst, l.Concurrency)
	}
	fmt.Println(local.UnsetLimit(ctx, "payments.charge"))
	// Output:
	// limit of payments.charge: a rate of 5000/s is over the 500/s one DynamoDB key takes with room for the calls it defers (docs/COST.md, "Limits")
	// payments.charge: 50/s, burst 0, 5 at once
	// <nil>
}
