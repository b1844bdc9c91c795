package cost_test

import (
	"fmt"
	"os"
	"time"

	"github.com/lambdasaga/lambdasaga/cost"
	"github.com/lambdasaga/lambdasaga/saga"
)

// Walk dry-runs a saga's path and prices it at AWS list prices, next to
// Step Functions Standard; the failing path prices its compensations too.
// sagactl cost prints the same report.
func ExampleWalk() {
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
	p := cost.Params{MemoryMB: 256, Duration: 20 * time.Millisecond, StateBytes: 800, BatchSize: 1}
	ok, err := cost.Walk(plan, p, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ok.Report(os.Stdout, "order", p, 1e6)
	failed, err := cost.Walk(plan, p, func(c saga.Call) bool { return c.Step == "ship" && !c.Compensation })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("\nwhen ship fails: %v, %d compensations, %d action steps\n", failed.Path, failed.Compensations, failed.ActionSteps)
	// Output:
	// saga order, path [reserve charge ship]
	// per saga: 3 action steps, 4 state writes, 3 reads, 9.0 SQS requests, 3.00 Lambda invocations, 0.01500 GB-s
	// assumed: 256 MB arm64 functions, 20ms billed per invocation, 800-byte state (1 WRU per write and 7 on the status index per saga, 1 RRU per read), batch size 1
	//
	//                              per saga     per 1M sagas
	// lambda requests           $0.00000060            $0.60
	// lambda compute            $0.00000020            $0.20
	// sqs                       $0.00000360            $3.60
	// dynamodb writes           $0.00000688            $6.88
	// dynamodb reads            $0.00000038            $0.38
	// lambdasaga total          $0.00001165           $11.65
	// Step Functions Std        $0.00007500           $75.00   (3 state transitions at $25 per million)
	// Step Functions Standard costs 6.4x as much for this saga.
	//
	// when ship fails: [reserve charge ship], 2 compensations, 5 action steps
}
