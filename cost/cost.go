// Package cost estimates what a saga costs on AWS with lambdasaga, next to
// what the same saga would cost on Step Functions Standard, from the
// definition (its path is walked with Advance, actions succeeding) and the
// list prices in Prices.
package cost

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/lambdasaga/lambdasaga/saga"
)

// Prices are AWS list prices, us-east-1, on-demand, without free tiers.
// Checked against the public pricing pages in November 2026; they are the
// one table to update when prices change.
type Prices struct {
	LambdaPerMillionRequests float64 // $0.20
	LambdaArmPerGBSecond     float64 // $0.0000133334
	SQSPerMillionRequests    float64 // standard queues, $0.40 per million 64 KB chunks
	DynamoPerMillionWRU      float64 // on-demand write request units, $0.625
	DynamoPerMillionRRU      float64 // on-demand read request units, $0.125
	StepFunctionsPerMillion  float64 // Standard workflows, per state transition, $25
}

// ListPrices is the table.
var ListPrices = Prices{
	LambdaPerMillionRequests: 0.20,
	LambdaArmPerGBSecond:     0.0000133334,
	SQSPerMillionRequests:    0.40,
	DynamoPerMillionWRU:      0.625,
	DynamoPerMillionRRU:      0.125,
	StepFunctionsPerMillion:  25.0,
}

// Params describe the deployment and the measurements the estimate uses.
type Params struct {
	MemoryMB     int           // the functions' memory (template: 256)
	Duration     time.Duration // billed duration of one invocation (one action step), measured
	StateBytes   int           // the saga's state item size, measured
	MessageBytes int           // one message (about 100 bytes)
	// BatchSize is how many messages one invocation handles on average
	// (1 when traffic is light; up to the event source's batch size).
	BatchSize float64
	Input     map[string]any // the input whose path is costed; nil: zero values
}

// check refuses figures no deployment has: negative or not finite. Zero
// means the default.
func (p Params) check() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"MemoryMB", float64(p.MemoryMB)},
		{"Duration", float64(p.Duration)},
		{"StateBytes", float64(p.StateBytes)},
		{"MessageBytes", float64(p.MessageBytes)},
		{"BatchSize", p.BatchSize},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("cost.Params.%s: must be a finite number, zero (the default) or more", f.name)
		}
	}
	return nil
}

// Saga counts the work of one saga on one path.
type Saga struct {
	Path           []string // steps run, in order
	ActionSteps    int      // messages and invocations
	Compensations  int      // compensations run once the saga fails; 0 when it succeeds
	Transitions    int      // state writes, start included
	SFNTransitions int      // Step Functions state transitions for the same path
	DynamoReads    int      // consistent GetItems: one per action step
	DynamoWrites   int      // PutItems: one per transition
	RRUPerRead     float64  // read units per read: StateBytes per 4 KB, rounded up
	WRUPerWrite    float64  // write units per write on the table: StateBytes per KB, rounded up
	// IndexWRU is the write units billed on the by_status index: 1 for the
	// create, and 2 for every later transition, because each changes the
	// entry's key (the update time): a delete and a put, each 1 unit for an
	// entry under 1 KB (DynamoDB Developer Guide, "Global secondary indexes:
	// writes"). The emulators do not report these.
	IndexWRU         float64
	SQSRequests      float64            // billed requests: a send per action step, a receive and a delete per batch
	LambdaInvokes    float64            // ActionSteps over BatchSize
	LambdaGBSeconds  float64            // ActionSteps times Duration times MemoryMB/1024
	CostLambdaSaga   float64            // USD per saga with lambdasaga: the sum of CostBreakdownUSD
	CostStepFnsSaga  float64            // USD per saga on Step Functions Standard: SFNTransitions at list price
	CostBreakdownUSD map[string]float64 // USD per saga by part: "lambda requests", "lambda compute", "sqs", "dynamodb writes", "dynamodb reads"
}

// Walk dry-runs the saga (actions succeed with their input as output,
// except the calls fail names; nil: none) and counts what each piece of
// the path costs. A negative or non-finite figure in p is an error.
func Walk(plan *saga.Plan, p Params, fail func(saga.Call) bool) (*Saga, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if fail == nil {
		fail = func(saga.Call) bool { return false }
	}
	if p.MemoryMB == 0 {
		p.MemoryMB = 256
	}
	if p.Duration == 0 {
		p.Duration = 10 * time.Millisecond
	}
	if p.StateBytes == 0 {
		p.StateBytes = 600
	}
	if p.MessageBytes == 0 {
		p.MessageBytes = 110
	}
	if p.BatchSize < 1 {
		p.BatchSize = 1
	}
	in, err := plan.CheckInput(p.Input)
	if err != nil {
		return nil, err
	}
	s := &Saga{CostBreakdownUSD: map[string]float64{}, Transitions: 1}
	_, err = plan.DryRun(saga.DryRunParams{
		Input: in,
		Act: func(call saga.Call) (any, error) {
			if fail(call) {
				return nil, saga.Permanent(saga.NewError("Failed", "costed failure"))
			}
			return call.Input, nil
		},
		OnCall: func(saga.Call) { s.ActionSteps++; s.Transitions++ },
		OnStep: func(rec saga.StepRecord) {
			if rec.Outcome == saga.OutcomeStarted {
				return
			}
			// Step Functions bills each state entered; counted conservatively
			// (nothing for the start or the end, one state per step).
			s.SFNTransitions++
			if rec.Compensation {
				s.Compensations++
			} else {
				s.Path = append(s.Path, rec.Step)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	s.DynamoReads = s.ActionSteps
	s.DynamoWrites = s.Transitions
	s.RRUPerRead = math.Ceil(float64(p.StateBytes) / 4096)                // strongly consistent: 1 RRU per 4 KB
	s.WRUPerWrite = math.Ceil(float64(p.StateBytes) / 1024)               // 1 WRU per 1 KB
	s.IndexWRU = float64(1 + 2*(s.Transitions-1))                         // the entry is put, then moved by every transition
	chunks := math.Ceil(float64(p.MessageBytes) / 65536)                  // SQS bills 64 KB chunks
	s.SQSRequests = float64(s.ActionSteps) * chunks * (1 + 2/p.BatchSize) // a send each; a receive and a delete per batch
	s.LambdaInvokes = float64(s.ActionSteps) / p.BatchSize
	s.LambdaGBSeconds = float64(s.ActionSteps) * p.Duration.Seconds() * float64(p.MemoryMB) / 1024
	pr := ListPrices
	s.CostBreakdownUSD["lambda requests"] = s.LambdaInvokes * pr.LambdaPerMillionRequests / 1e6
	s.CostBreakdownUSD["lambda compute"] = s.LambdaGBSeconds * pr.LambdaArmPerGBSecond
	s.CostBreakdownUSD["sqs"] = s.SQSRequests * pr.SQSPerMillionRequests / 1e6
	s.CostBreakdownUSD["dynamodb writes"] = (float64(s.DynamoWrites)*s.WRUPerWrite + s.IndexWRU) * pr.DynamoPerMillionWRU / 1e6
	s.CostBreakdownUSD["dynamodb reads"] = float64(s.DynamoReads) * s.RRUPerRead * pr.DynamoPerMillionRRU / 1e6
	for _, k := range slices.Sorted(maps.Keys(s.CostBreakdownUSD)) { // one order, so one total to the last bit
		s.CostLambdaSaga += s.CostBreakdownUSD[k]
	}
	s.CostStepFnsSaga = float64(s.SFNTransitions) * pr.StepFunctionsPerMillion / 1e6
	return s, nil
}

// Report writes the estimate for sagasPerMonth sagas.
func (s *Saga) Report(w io.Writer, name string, p Params, sagasPerMonth float64) {
	fmt.Fprintf(w, "saga %s, path %v", name, s.Path)
	if s.Compensations > 0 {
		fmt.Fprintf(w, " then %d compensation(s)", s.Compensations)
	}
	fmt.Fprintf(w, "\nper saga: %d action steps, %d state writes, %d reads, %.1f SQS requests, %.2f Lambda invocations, %.5f GB-s\n",
		s.ActionSteps, s.DynamoWrites, s.DynamoReads, s.SQSRequests, s.LambdaInvokes, s.LambdaGBSeconds)
	fmt.Fprintf(w, "assumed: %d MB arm64 functions, %s billed per invocation, %d-byte state (%g WRU per write and %g on the status index per saga, %g RRU per read), batch size %g\n",
		orDefault(p.MemoryMB, 256), orDur(p.Duration), orDefault(p.StateBytes, 600), s.WRUPerWrite, s.IndexWRU, s.RRUPerRead, math.Max(1, p.BatchSize))
	fmt.Fprintf(w, "\n%-22s %14s %16s\n", "", "per saga", fmt.Sprintf("per %s sagas", human(sagasPerMonth)))
	for _, k := range []string{"lambda requests", "lambda compute", "sqs", "dynamodb writes", "dynamodb reads"} {
		fmt.Fprintf(w, "%-22s %14s %16s\n", k, usd(s.CostBreakdownUSD[k]), usd(s.CostBreakdownUSD[k]*sagasPerMonth))
	}
	fmt.Fprintf(w, "%-22s %14s %16s\n", "lambdasaga total", usd(s.CostLambdaSaga), usd(s.CostLambdaSaga*sagasPerMonth))
	fmt.Fprintf(w, "%-22s %14s %16s   (%d state transitions at $25 per million)\n", "Step Functions Std", usd(s.CostStepFnsSaga), usd(s.CostStepFnsSaga*sagasPerMonth), s.SFNTransitions)
	if s.CostLambdaSaga > 0 {
		fmt.Fprintf(w, "Step Functions Standard costs %.1fx as much for this saga.\n", s.CostStepFnsSaga/s.CostLambdaSaga)
	}
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func orDur(d time.Duration) time.Duration {
	if d == 0 {
		return 10 * time.Millisecond
	}
	return d
}

func usd(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v < 0.01:
		return fmt.Sprintf("$%.8f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

func human(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.3gM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.3gk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}
