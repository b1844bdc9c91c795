package cost_test

import (
	"fmt"
	"os"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/cost"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Walk runs a saga's path and prices it at AWS list prices, next to Step
// Functions Standard and Express and Lambda durable functions; the failing
// path prices its compensations too. sagactl cost prints the same report.
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
	p := cost.Params{MemoryMB: 256, Duration: 20 * time.Millisecond, StateBytes: 600, BatchSize: 1}
	ok, err := cost.Walk(plan, p, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ok.Report(os.Stdout, "order", 1e6)
	failed, err := cost.Walk(plan, p, func(c saga.Call) bool { return c.Step == "ship" && !c.Compensation })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("\nwhen ship fails: %v, %d compensations, %d action steps (%d chained), statuses %v, %g index write units\n",
		failed.Path, failed.Compensations, failed.ActionSteps, failed.ChainedSteps, failed.Statuses, failed.IndexWRU)
	// Output:
	// saga order, path [reserve charge ship]
	// statuses written: running x3, succeeded (1 status change(s))
	// chains: 2 of 3 action step(s) chained, each its write alone (no message, read or invocation); at most 50 after a message's own step, 5s a chain shared by the batch, 30s functions, each action 20ms
	//   reserve                      message  first step after the start
	//   charge                       chained
	//   ship                         chained
	// per saga: 3 action steps (2 chained), 1 message(s) handled, 4 state writes, 1 read(s), 3.0 SQS requests, 1.00 Lambda invocations, 0.01500 GB-s
	// without chains: 3 message(s) handled, 3 read(s), 9.0 SQS requests, 3.00 Lambda invocations (the writes and the compute are the same)
	// DynamoDB per saga: 4 WRU on the table (items up to 871 bytes: the state and 271 bytes of keys and attributes), 3 on the by_status index (1 at the start, 2 per status change; 239-byte entries), 1 RRU
	// assumed: 256 MB arm64 functions, 20ms billed per action step, 600-byte state, batch size 1, 36-byte saga ids
	//
	//                                  per saga     per 1M sagas  per 1M action steps   vs lambdasaga
	// lambda requests               $0.00000020            $0.20                $0.07
	// lambda compute                $0.00000020            $0.20                $0.07
	// sqs                           $0.00000120            $1.20                $0.40
	// dynamodb writes               $0.00000437            $4.38                $1.46
	// dynamodb reads                $0.00000012            $0.12                $0.04
	// lambdasaga total              $0.00000610            $6.10                $2.03
	// lambdasaga without chains     $0.00000915            $9.15                $3.05            1.5x
	// Step Functions Standard       $0.00007580           $75.80               $25.27           12.4x
	// Step Functions Express        $0.00000190            $1.90                $0.63            0.3x
	// Lambda durable functions      $0.00002440           $24.40                $8.13            4.0x
	//
	// Step Functions Standard: 3 state transitions at $25 per million (one per step, retry and compensation, an await or a callback step being one .waitForTaskToken task; none for the start and the end), plus the actions' 3 Lambda invocations.
	// Step Functions Express: 1 request at $1.00 per million and 100ms at 64 MB (the actions' billed durations, the retries' backoff and the waits, rounded up to 100 ms; no time queued), plus the actions' 3 Lambda invocations; only for sagas that end within 5 minutes and neither await nor call back (Express has no .waitForTaskToken).
	// Lambda durable functions: 3 durable operations at $8.00 per million (one step per call, every attempt, one per wait, one callback per await and per callback step; the execution's start not counted), the function invoked 1 time(s) to run the calls; the data written and retained is billed too, at a price not found: not counted.
	//
	// when ship fails: [reserve charge ship], 2 compensations, 5 action steps (3 chained), statuses [running running running compensating compensating compensated], 5 index write units
}
