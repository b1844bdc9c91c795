package cost

import (
	"fmt"
	"math"
	"time"
)

// Comparison prices the walked path on another AWS service. Actions run
// there as Lambda functions too, with the same memory and duration.
type Comparison struct {
	// Name is stable: "step_functions_standard", "step_functions_express"
	// or "lambda_durable_functions".
	Name  string
	Title string // for people: "Step Functions Standard", ...
	// Fits is false when the service cannot run this saga as walked
	// (Express: over ExpressMaxDuration); the figures are computed anyway.
	Fits        bool
	BilledUnits float64 // state transitions, requests or durable operations
	Unit        string  // what BilledUnits counts
	// OrchestrationUSD is per saga: what the service bills to run the
	// saga, the Lambda functions aside.
	OrchestrationUSD float64
	// LambdaUSD is per saga: the Lambda requests and compute of the
	// actions run there.
	LambdaUSD float64
	TotalUSD  float64 // OrchestrationUSD plus LambdaUSD
	Counts    string  // what is counted, and what is assumed, for people
}

// compare prices the path on Step Functions Standard and Express and on
// Lambda durable functions.
func (s *Saga) compare() []Comparison {
	p, pr := s.Params, ListPrices
	gbs := p.Duration.Seconds() * float64(p.MemoryMB) / 1024 // one call's
	// On Step Functions every call (each attempt) is one invocation of the
	// action's function; a call whose input cannot be built invokes nothing.
	actions := float64(s.Calls) * (pr.LambdaPerMillionRequests/1e6 + gbs*pr.LambdaArmPerGBSecond)

	std := Comparison{Name: "step_functions_standard", Title: "Step Functions Standard", Fits: true,
		BilledUnits: float64(s.SFNTransitions), Unit: "state transitions",
		OrchestrationUSD: float64(s.SFNTransitions) * pr.StepFunctionsPerMillion / 1e6, LambdaUSD: actions,
		Counts: fmt.Sprintf("%d state transitions at $%g per million (one per step, retry and compensation, an await or a callback step being one .waitForTaskToken task; none for the start and the end), plus the actions' %d Lambda invocations", s.SFNTransitions, pr.StepFunctionsPerMillion, s.Calls)}

	dur := s.ExpressDuration()
	expressGBs := dur.Seconds() * ExpressMemoryMB / 1024
	// Express runs Request Response integrations only: no Wait for
	// Callback (.waitForTaskToken), so no await and no callback (Step
	// Functions Developer Guide, "Integrating optimized services with Step
	// Functions").
	deliveries := s.Signals + s.Callbacks
	exp := Comparison{Name: "step_functions_express", Title: "Step Functions Express", Fits: dur <= ExpressMaxDuration && deliveries == 0,
		BilledUnits: 1, Unit: "requests",
		OrchestrationUSD: pr.StepFunctionsExpressPerMillion/1e6 + expressGBs*pr.StepFunctionsExpressPerGBSecond, LambdaUSD: actions,
		Counts: fmt.Sprintf("1 request at $%.2f per million and %s at %d MB (the actions' billed durations, the retries' backoff and the waits, rounded up to 100 ms; no time queued), plus the actions' %d Lambda invocations; only for sagas that end within 5 minutes and neither await nor call back (Express has no .waitForTaskToken)", pr.StepFunctionsExpressPerMillion, dur, ExpressMemoryMB, s.Calls)}

	// A durable function runs the saga in one function: each call is a
	// step (a durable operation), each wait a wait operation, each await and
	// each callback a callback operation (waitForCallback: the callback
	// step's action is its submitter, a call already counted; an await is
	// a callback whose id the signal's sender holds); set, switch and
	// assert steps are plain code. It is invoked once, and again after each
	// retry's backoff, each wait and each callback completed, which it
	// waits out suspended. Counted at the least: waitForCallback's child
	// context is not counted as an operation of its own.
	invokes := 1 + float64(s.Retries) + float64(s.Timers) + float64(deliveries-s.SignalsKept)
	ops := float64(s.Calls + s.Timers + deliveries)
	durable := Comparison{Name: "lambda_durable_functions", Title: "Lambda durable functions", Fits: true,
		BilledUnits: ops, Unit: "durable operations",
		OrchestrationUSD: ops * pr.DurablePerMillionOperations / 1e6,
		LambdaUSD:        invokes*pr.LambdaPerMillionRequests/1e6 + float64(s.Calls)*gbs*pr.LambdaArmPerGBSecond,
		Counts:           fmt.Sprintf("%g durable operations at $%.2f per million (one step per call, every attempt, one per wait, one callback per await and per callback step; the execution's start not counted), the function invoked %g time(s) to run the calls; the data written and retained is billed too, at a price not found: not counted", ops, pr.DurablePerMillionOperations, invokes)}

	out := []Comparison{std, exp, durable}
	for i := range out {
		out[i].TotalUSD = out[i].OrchestrationUSD + out[i].LambdaUSD
		if p.LargeValueBytes > MaxPeerPayloadBytes {
			// Neither carries the value: the user would keep it in S3 and
			// pass its key, at a cost not counted here.
			out[i].Fits = false
			out[i].Counts += fmt.Sprintf("; a value of %d bytes is over its %d-byte payload limit", p.LargeValueBytes, MaxPeerPayloadBytes)
		}
	}
	return out
}

// MaxPeerPayloadBytes is the largest payload the services compared take:
// Step Functions, 256 KiB of input or output per state and execution
// (Step Functions Developer Guide, "Step Functions service quotas");
// Lambda durable functions, 256 KB per checkpoint and input
// (aws/durable-execution-sdk-rust, docs/LIMITS.md). A saga whose values
// are larger does not run there as it is.
const MaxPeerPayloadBytes = 256 << 10

// ExpressDuration is how long the saga would run as an Express workflow,
// as billed: its calls' durations, its retries' backoff and its waits,
// rounded up to 100 ms. Time spent queued is not known here and not
// counted.
func (s *Saga) ExpressDuration() time.Duration {
	d := time.Duration(s.Calls)*s.Params.Duration + s.RetryWait + s.WaitTime
	return time.Duration(math.Ceil(float64(d)/float64(100*time.Millisecond))) * 100 * time.Millisecond
}
