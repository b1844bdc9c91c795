package cost

import (
	"fmt"
	"io"
	"strings"
)

// Estimate is the estimate of one saga on one path for a month's volume,
// as `sagactl cost --json` prints it. Its JSON field names are stable; a
// new field may be added, none renamed. Dollars are USD at ListPrices;
// per_saga counts are per saga, so fractional where batching shares
// requests.
type Estimate struct {
	Saga          string      `json:"saga"`            // the definition's name
	Path          []string    `json:"path"`            // the steps run, in order
	Compensations int         `json:"compensations"`   // compensations run
	Retries       int         `json:"retries"`         // attempts retried
	Statuses      []string    `json:"statuses"`        // the status each transition writes, the start's first
	SagasPerMonth float64     `json:"sagas_per_month"` // the volume usd_per_month is for
	Assumptions   Assumptions `json:"assumptions"`     // the figures assumed
	PerSaga       Counts      `json:"per_saga"`        // requests and units
	USDPerSaga    Dollars     `json:"usd_per_saga"`    // lambdasaga's costs
	USDPerMonth   Dollars     `json:"usd_per_month"`   // usd_per_saga times sagas_per_month
	// Comparisons are Step Functions Standard, Step Functions Express and
	// Lambda durable functions, in that order.
	Comparisons []ComparisonEstimate `json:"comparisons"`
}

// Assumptions are the figures the estimate rests on, defaults filled in.
type Assumptions struct {
	MemoryMB   int     `json:"memory_mb"`   // the functions' memory, arm64
	DurationMS float64 `json:"duration_ms"` // billed per invocation
	StateBytes int     `json:"state_bytes"` // the encoded state
	// ItemBytes is the largest saga item: the state plus
	// item_overhead_bytes of keys and other attributes.
	ItemBytes         int     `json:"item_bytes"`
	ItemOverheadBytes int     `json:"item_overhead_bytes"` // keys and other attributes
	IndexEntryBytes   int     `json:"index_entry_bytes"`   // one by_status entry
	MessageBytes      int     `json:"message_bytes"`       // one SQS message
	BatchSize         float64 `json:"batch_size"`          // messages per invocation
	SagaIDBytes       int     `json:"saga_id_bytes"`       // the saga ids' length
}

// Counts are one saga's requests and capacity units.
type Counts struct {
	ActionSteps   int `json:"action_steps"`   // messages handled
	Transitions   int `json:"transitions"`    // state writes, the start included
	StatusChanges int `json:"status_changes"` // transitions whose status differs from the one before
	Timers        int `json:"timers"`         // wait steps' timers fired
	Signals       int `json:"signals"`        // signals delivered to awaits, kept ones included
	SignalsKept   int `json:"signals_kept"`   // signals kept before their await (--signals-first)
	Callbacks     int `json:"callbacks"`      // callback tokens completed
	// Requests are the billed requests by service.
	Requests struct {
		LambdaInvocations float64 `json:"lambda_invocations"`
		SQS               float64 `json:"sqs"`            // sends, receives and deletes, per 64 KB chunk
		DynamoDBReads     int     `json:"dynamodb_reads"` // consistent GetItems
		DynamoDBWrites    int     `json:"dynamodb_writes"`
	} `json:"requests"`
	ReadUnits float64 `json:"read_units"` // DynamoDB's read units, the reads' in all
	// WriteUnits are DynamoDB's write units: on the table, on the
	// by_status index (1 at the start, 2 per status change), and both.
	WriteUnits struct {
		Table float64 `json:"table"`
		Index float64 `json:"index"`
		Total float64 `json:"total"`
	} `json:"write_units"`
	LambdaGBSeconds float64 `json:"lambda_gb_seconds"` // the actions' compute
}

// Dollars are lambdasaga's costs by part.
type Dollars struct {
	LambdaRequests float64 `json:"lambda_requests"` // Lambda invocations
	LambdaCompute  float64 `json:"lambda_compute"`  // Lambda GB-seconds
	SQS            float64 `json:"sqs"`             // SQS requests
	DynamoDBWrites float64 `json:"dynamodb_writes"` // table and index
	DynamoDBReads  float64 `json:"dynamodb_reads"`  // read units
	Total          float64 `json:"total"`           // the parts above
}

// ComparisonEstimate is a Comparison in an Estimate.
type ComparisonEstimate struct {
	Name        string  `json:"name"`         // step_functions_standard, step_functions_express, lambda_durable_functions
	Title       string  `json:"title"`        // for people
	Fits        bool    `json:"fits"`         // false: the service cannot run this saga (Express over 5 minutes)
	BilledUnits float64 `json:"billed_units"` // what the service bills per saga, in unit
	Unit        string  `json:"unit"`         // what billed_units counts
	// OrchestrationUSDPerSaga is the service's own charge, the actions'
	// Lambda functions aside (LambdaUSDPerSaga).
	OrchestrationUSDPerSaga float64 `json:"orchestration_usd_per_saga"`
	LambdaUSDPerSaga        float64 `json:"lambda_usd_per_saga"` // the actions' Lambda requests and compute there
	USDPerSaga              float64 `json:"usd_per_saga"`        // the two above
	USDPerMonth             float64 `json:"usd_per_month"`       // usd_per_saga times sagas_per_month
	// TimesLambdasaga is usd_per_saga over lambdasaga's total.
	TimesLambdasaga float64 `json:"times_lambdasaga"`
	Counts          string  `json:"counts"` // what is counted and assumed
}

// Estimate gathers the walk's figures for sagasPerMonth sagas.
func (s *Saga) Estimate(name string, sagasPerMonth float64) Estimate {
	p := s.Params
	e := Estimate{Saga: name, Path: s.Path, Compensations: s.Compensations, Retries: s.Retries,
		Statuses: s.Statuses, SagasPerMonth: sagasPerMonth,
		Assumptions: Assumptions{MemoryMB: p.MemoryMB, DurationMS: float64(p.Duration.Microseconds()) / 1000,
			StateBytes: p.StateBytes, ItemBytes: s.ItemBytes, ItemOverheadBytes: s.ItemOverheadBytes,
			IndexEntryBytes: s.IndexEntryBytes, MessageBytes: p.MessageBytes, BatchSize: p.BatchSize, SagaIDBytes: p.SagaIDBytes},
	}
	if e.Path == nil {
		e.Path = []string{}
	}
	c := &e.PerSaga
	c.ActionSteps, c.Transitions, c.StatusChanges = s.ActionSteps, s.Transitions, s.StatusChanges
	c.Timers, c.Signals, c.SignalsKept, c.Callbacks = s.Timers, s.Signals, s.SignalsKept, s.Callbacks
	c.Requests.LambdaInvocations, c.Requests.SQS = s.LambdaInvokes, s.SQSRequests
	c.Requests.DynamoDBReads, c.Requests.DynamoDBWrites = s.DynamoReads, s.DynamoWrites
	c.ReadUnits = float64(s.DynamoReads) * s.RRUPerRead
	c.WriteUnits.Table, c.WriteUnits.Index, c.WriteUnits.Total = s.TableWRU, s.IndexWRU, s.TableWRU+s.IndexWRU
	c.LambdaGBSeconds = s.LambdaGBSeconds
	b := s.CostBreakdownUSD
	e.USDPerSaga = Dollars{b["lambda requests"], b["lambda compute"], b["sqs"], b["dynamodb writes"], b["dynamodb reads"], s.CostLambdaSaga}
	m := e.USDPerSaga
	e.USDPerMonth = Dollars{m.LambdaRequests * sagasPerMonth, m.LambdaCompute * sagasPerMonth, m.SQS * sagasPerMonth,
		m.DynamoDBWrites * sagasPerMonth, m.DynamoDBReads * sagasPerMonth, m.Total * sagasPerMonth}
	for _, cmp := range s.Comparisons {
		ce := ComparisonEstimate{Name: cmp.Name, Title: cmp.Title, Fits: cmp.Fits, BilledUnits: cmp.BilledUnits, Unit: cmp.Unit,
			OrchestrationUSDPerSaga: cmp.OrchestrationUSD, LambdaUSDPerSaga: cmp.LambdaUSD, USDPerSaga: cmp.TotalUSD,
			USDPerMonth: cmp.TotalUSD * sagasPerMonth, Counts: cmp.Counts}
		if s.CostLambdaSaga > 0 {
			ce.TimesLambdasaga = cmp.TotalUSD / s.CostLambdaSaga
		}
		e.Comparisons = append(e.Comparisons, ce)
	}
	return e
}

// Report writes the estimate for sagasPerMonth sagas, for people.
func (s *Saga) Report(w io.Writer, name string, sagasPerMonth float64) {
	e := s.Estimate(name, sagasPerMonth)
	p, c, a := s.Params, e.PerSaga, e.Assumptions
	fmt.Fprintf(w, "saga %s, path %v", name, s.Path)
	if s.Compensations > 0 {
		fmt.Fprintf(w, " then %d compensation(s)", s.Compensations)
	}
	if s.Retries > 0 {
		fmt.Fprintf(w, ", %d retried attempt(s)", s.Retries)
	}
	fmt.Fprintf(w, "\nstatuses written: %s (%d status change(s))\n", runs(s.Statuses), s.StatusChanges)
	if s.Timers+s.Signals+s.Callbacks > 0 {
		fmt.Fprintf(w, "pauses: %d timer(s) fired, %d signal(s) (%d kept before their await), %d callback(s) completed; %d by_due entries put and deleted, %d timer message(s) dropped after a delivery\n",
			s.Timers, s.Signals, s.SignalsKept, s.Callbacks, s.Timers+s.Parked, s.StaleTimers)
	}
	fmt.Fprintf(w, "per saga: %d action steps, %d state writes, %d reads, %.1f SQS requests, %.2f Lambda invocations, %.5f GB-s\n",
		c.ActionSteps, c.Requests.DynamoDBWrites, c.Requests.DynamoDBReads, c.Requests.SQS, c.Requests.LambdaInvocations, c.LambdaGBSeconds)
	index := fmt.Sprintf("on the by_status index (1 at the start, 2 per status change; %d-byte entries)", a.IndexEntryBytes)
	if pauses := s.Timers + s.Parked; pauses > 0 {
		index = fmt.Sprintf("on the indexes (by_status: 1 at the start, 2 per status change, %d-byte entries; by_due: %d, an entry put and deleted per pause)", a.IndexEntryBytes, 2*pauses)
	}
	fmt.Fprintf(w, "DynamoDB per saga: %g WRU on the table (items up to %d bytes: the state and %d bytes of keys and attributes), %g %s, %g RRU\n",
		c.WriteUnits.Table, a.ItemBytes, a.ItemOverheadBytes, c.WriteUnits.Index, index, c.ReadUnits)
	fmt.Fprintf(w, "assumed: %d MB arm64 functions, %s billed per invocation, %d-byte state, batch size %g, %d-byte saga ids\n",
		p.MemoryMB, p.Duration, p.StateBytes, p.BatchSize, p.SagaIDBytes)
	fmt.Fprintf(w, "\n%-26s %14s %16s %15s\n", "", "per saga", fmt.Sprintf("per %s sagas", human(sagasPerMonth)), "vs lambdasaga")
	for _, k := range Parts() {
		fmt.Fprintf(w, "%-26s %14s %16s\n", k, usd(s.CostBreakdownUSD[k]), usd(s.CostBreakdownUSD[k]*sagasPerMonth))
	}
	fmt.Fprintf(w, "%-26s %14s %16s\n", "lambdasaga total", usd(s.CostLambdaSaga), usd(s.CostLambdaSaga*sagasPerMonth))
	for _, ce := range e.Comparisons {
		if !ce.Fits {
			// A price for what the service cannot run would read as an
			// offer: say so instead (Counts says why).
			fmt.Fprintf(w, "%-26s %14s\n", ce.Title, "does not fit")
			continue
		}
		fmt.Fprintf(w, "%-26s %14s %16s %14.1fx\n", ce.Title, usd(ce.USDPerSaga), usd(ce.USDPerMonth), ce.TimesLambdasaga)
	}
	fmt.Fprintln(w)
	for _, ce := range e.Comparisons {
		fmt.Fprintf(w, "%s: %s.\n", ce.Title, ce.Counts)
	}
}

// runs writes statuses with repeats folded: "running x3, succeeded".
func runs(statuses []string) string {
	var b strings.Builder
	for i := 0; i < len(statuses); {
		j := i
		for j < len(statuses) && statuses[j] == statuses[i] {
			j++
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(statuses[i])
		if j-i > 1 {
			fmt.Fprintf(&b, " x%d", j-i)
		}
		i = j
	}
	return b.String()
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
