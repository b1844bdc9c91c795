package cost

import (
	"fmt"
	"io"
	"strings"
	"time"
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
	// USDPerMillionActionSteps is usd_per_saga's total per million of the
	// path's action steps (0 when it runs none): the figure docs/COST.md
	// compares.
	USDPerMillionActionSteps float64 `json:"usd_per_million_action_steps"`
	// Steps is each step run, in order: each action step chained or not,
	// and why not; the waits, awaits and forks, which never chain.
	Steps []StepRun `json:"steps"`
	// Unchained is the same path with every action step a message of its
	// own (as without chains); the same as above when chaining is off.
	Unchained UnchainedEstimate `json:"unchained"`
	// Comparisons are Step Functions Standard, Step Functions Express and
	// Lambda durable functions, in that order.
	Comparisons []ComparisonEstimate `json:"comparisons"`
}

// UnchainedEstimate is what chains change, priced without them: the
// writes, units and compute are the same.
type UnchainedEstimate struct {
	Messages                 int      `json:"messages"` // messages handled
	Requests                 Requests `json:"requests"`
	ReadUnits                float64  `json:"read_units"`
	USDPerSaga               Dollars  `json:"usd_per_saga"`
	USDPerMonth              Dollars  `json:"usd_per_month"`
	USDPerMillionActionSteps float64  `json:"usd_per_million_action_steps"`
}

// Assumptions are the figures the estimate rests on, defaults filled in.
type Assumptions struct {
	MemoryMB   int     `json:"memory_mb"`   // the functions' memory, arm64
	DurationMS float64 `json:"duration_ms"` // billed per action step
	StateBytes int     `json:"state_bytes"` // the encoded state
	// ItemBytes is the largest saga item: the state plus
	// item_overhead_bytes of keys and other attributes.
	ItemBytes         int     `json:"item_bytes"`
	ItemOverheadBytes int     `json:"item_overhead_bytes"` // keys and other attributes
	IndexEntryBytes   int     `json:"index_entry_bytes"`   // one by_status entry
	MessageBytes      int     `json:"message_bytes"`       // one SQS message
	BatchSize         float64 `json:"batch_size"`          // messages per invocation
	SagaIDBytes       int     `json:"saga_id_bytes"`       // the saga ids' length
	// ChainSteps is how many steps a chain runs after its message's own;
	// -1: chaining off.
	ChainSteps        int     `json:"chain_steps"`
	ChainTimeMS       float64 `json:"chain_time_ms"`       // a chain's time budget, shared by the batch
	FunctionTimeoutMS float64 `json:"function_timeout_ms"` // the functions' timeout
	// StartQueue: started, signalled and called back through the start
	// queue (cost.Params.StartQueue).
	StartQueue bool `json:"start_queue"`
	// LargeValues of LargeValueBytes pass through the saga, kept as
	// objects when over OffloadBytes (Offloaded) for ObjectDays
	// (cost.Params).
	LargeValues     int  `json:"large_values"`
	LargeValueBytes int  `json:"large_value_bytes"`
	OffloadBytes    int  `json:"offload_bytes"`
	Offloaded       bool `json:"offloaded"`
	ObjectDays      int  `json:"object_days"`
}

// Counts are one saga's requests and capacity units.
type Counts struct {
	ActionSteps   int `json:"action_steps"`   // actions and compensations run, every attempt
	ChainedSteps  int `json:"chained_steps"`  // of action_steps, those run in a chain: a write each, no message
	Messages      int `json:"messages"`       // messages handled
	Transitions   int `json:"transitions"`    // state writes, the start included
	StatusChanges int `json:"status_changes"` // transitions whose status differs from the one before
	Timers        int `json:"timers"`         // wait steps' timers fired
	Signals       int `json:"signals"`        // signals delivered to awaits, kept ones included
	SignalsKept   int `json:"signals_kept"`   // signals kept before their await (--signals-first)
	Callbacks     int `json:"callbacks"`      // callback tokens completed
	// StartQueueRequests are the start queue's requests: the start, the
	// signals and the completions, with --start-queue; they are among
	// messages.
	StartQueueRequests int      `json:"start_queue_requests"`
	Requests           Requests `json:"requests"`
	ReadUnits          float64  `json:"read_units"` // DynamoDB's read units, the reads' in all
	// WriteUnits are DynamoDB's write units: on the table, on the
	// by_status index (1 at the start, 2 per status change), and both.
	WriteUnits struct {
		Table float64 `json:"table"`
		Index float64 `json:"index"`
		Total float64 `json:"total"`
	} `json:"write_units"`
	LambdaGBSeconds float64 `json:"lambda_gb_seconds"` // the actions' compute
}

// Requests are the billed requests by service.
type Requests struct {
	LambdaInvocations float64 `json:"lambda_invocations"`
	SQS               float64 `json:"sqs"`            // sends, receives and deletes, per 64 KB chunk
	DynamoDBReads     int     `json:"dynamodb_reads"` // consistent GetItems
	DynamoDBWrites    int     `json:"dynamodb_writes"`
	S3Puts            int     `json:"s3_puts"` // the large values kept as objects
	S3Gets            int     `json:"s3_gets"` // their cold reads, one per value per step handled from its message
	// S3Lists and S3Copies mark the objects ended when the saga's tree
	// ends: a LIST of its prefix per 1,000, a COPY of each with the tag.
	S3Lists  int `json:"s3_lists"`
	S3Copies int `json:"s3_copies"`
}

// Dollars are lambdasaga's costs by part.
type Dollars struct {
	LambdaRequests float64 `json:"lambda_requests"` // Lambda invocations
	LambdaCompute  float64 `json:"lambda_compute"`  // Lambda GB-seconds
	SQS            float64 `json:"sqs"`             // SQS requests
	DynamoDBWrites float64 `json:"dynamodb_writes"` // table and index
	DynamoDBReads  float64 `json:"dynamodb_reads"`  // read units
	S3Requests     float64 `json:"s3_requests"`     // the objects' PUTs and GETs
	S3Storage      float64 `json:"s3_storage"`      // the objects kept ObjectDays
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
	// USDPerMillionActionSteps is usd_per_saga per million of the path's
	// action steps (0 when it runs none).
	USDPerMillionActionSteps float64 `json:"usd_per_million_action_steps"`
	// TimesLambdasaga is usd_per_saga over lambdasaga's total;
	// TimesLambdasagaUnchained over its total without chains.
	TimesLambdasaga          float64 `json:"times_lambdasaga"`
	TimesLambdasagaUnchained float64 `json:"times_lambdasaga_unchained"`
	Counts                   string  `json:"counts"` // what is counted and assumed
}

// Estimate gathers the walk's figures for sagasPerMonth sagas.
func (s *Saga) Estimate(name string, sagasPerMonth float64) Estimate {
	p := s.Params
	chainSteps := p.ChainSteps
	if !p.Chaining() {
		chainSteps = -1
	}
	e := Estimate{Saga: name, Path: s.Path, Compensations: s.Compensations, Retries: s.Retries,
		Statuses: s.Statuses, SagasPerMonth: sagasPerMonth,
		Assumptions: Assumptions{MemoryMB: p.MemoryMB, DurationMS: ms(p.Duration),
			StateBytes: p.StateBytes, ItemBytes: s.ItemBytes, ItemOverheadBytes: s.ItemOverheadBytes,
			IndexEntryBytes: s.IndexEntryBytes, MessageBytes: p.MessageBytes, BatchSize: p.BatchSize, SagaIDBytes: p.SagaIDBytes,
			ChainSteps: chainSteps, ChainTimeMS: ms(p.ChainTime), FunctionTimeoutMS: ms(p.FunctionTimeout), StartQueue: p.StartQueue,
			LargeValues: p.LargeValues, LargeValueBytes: p.LargeValueBytes, OffloadBytes: p.OffloadBytes, Offloaded: p.Offloaded(), ObjectDays: p.ObjectDays},
		Steps: s.Steps,
	}
	if e.Path == nil {
		e.Path = []string{}
	}
	if e.Steps == nil {
		e.Steps = []StepRun{}
	}
	c := &e.PerSaga
	c.ActionSteps, c.ChainedSteps, c.Messages, c.Transitions, c.StatusChanges = s.ActionSteps, s.ChainedSteps, s.Messages, s.Transitions, s.StatusChanges
	c.Timers, c.Signals, c.SignalsKept, c.Callbacks, c.StartQueueRequests = s.Timers, s.Signals, s.SignalsKept, s.Callbacks, s.QueueRequests
	c.Requests = s.requests(s.Priced)
	c.ReadUnits = float64(s.DynamoReads) * s.RRUPerRead
	c.WriteUnits.Table, c.WriteUnits.Index, c.WriteUnits.Total = s.TableWRU, s.IndexWRU, s.TableWRU+s.IndexWRU
	c.LambdaGBSeconds = s.LambdaGBSeconds
	e.USDPerSaga, e.USDPerMonth = dollars(s.Priced, sagasPerMonth)
	e.USDPerMillionActionSteps = s.PerMillionActionSteps(s.CostLambdaSaga)
	u := s.Unchained
	e.Unchained = UnchainedEstimate{Messages: u.Messages, Requests: s.requests(u), ReadUnits: float64(u.DynamoReads) * s.RRUPerRead,
		USDPerMillionActionSteps: s.PerMillionActionSteps(u.CostLambdaSaga)}
	e.Unchained.USDPerSaga, e.Unchained.USDPerMonth = dollars(u, sagasPerMonth)
	for _, cmp := range s.Comparisons {
		ce := ComparisonEstimate{Name: cmp.Name, Title: cmp.Title, Fits: cmp.Fits, BilledUnits: cmp.BilledUnits, Unit: cmp.Unit,
			OrchestrationUSDPerSaga: cmp.OrchestrationUSD, LambdaUSDPerSaga: cmp.LambdaUSD, USDPerSaga: cmp.TotalUSD,
			USDPerMonth: cmp.TotalUSD * sagasPerMonth, USDPerMillionActionSteps: s.PerMillionActionSteps(cmp.TotalUSD), Counts: cmp.Counts}
		if s.CostLambdaSaga > 0 {
			ce.TimesLambdasaga = cmp.TotalUSD / s.CostLambdaSaga
		}
		if u.CostLambdaSaga > 0 {
			ce.TimesLambdasagaUnchained = cmp.TotalUSD / u.CostLambdaSaga
		}
		e.Comparisons = append(e.Comparisons, ce)
	}
	return e
}

// requests are c's requests by service; the writes are the same with
// chains and without.
func (s *Saga) requests(c Priced) Requests {
	return Requests{LambdaInvocations: c.LambdaInvokes, SQS: c.SQSRequests, DynamoDBReads: c.DynamoReads, DynamoDBWrites: s.DynamoWrites, S3Puts: c.ObjectPuts, S3Gets: c.ObjectGets, S3Lists: c.ObjectLists, S3Copies: c.ObjectCopies}
}

// dollars are c's dollars per saga, and for sagasPerMonth sagas.
func dollars(c Priced, sagasPerMonth float64) (perSaga, perMonth Dollars) {
	b := c.CostBreakdownUSD
	m := Dollars{b["lambda requests"], b["lambda compute"], b["sqs"], b["dynamodb writes"], b["dynamodb reads"], b["s3 requests"], b["s3 storage"], c.CostLambdaSaga}
	return m, Dollars{m.LambdaRequests * sagasPerMonth, m.LambdaCompute * sagasPerMonth, m.SQS * sagasPerMonth,
		m.DynamoDBWrites * sagasPerMonth, m.DynamoDBReads * sagasPerMonth, m.S3Requests * sagasPerMonth, m.S3Storage * sagasPerMonth, m.Total * sagasPerMonth}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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
	s.reportChains(w)
	if p.LargeValues > 0 {
		if p.Offloaded() {
			fmt.Fprintf(w, "large values: %d of %d bytes, over the %d-byte threshold: kept as S3 objects (%d PUT(s), %d GET(s) at most; at the end %d LIST(s) and %d COPY(s) to mark them ended, then %d days stored), a %d-byte reference each in the item\n",
				p.LargeValues, p.LargeValueBytes, p.OffloadBytes, s.ObjectPuts, s.ObjectGets, s.ObjectLists, s.ObjectCopies, p.ObjectDays, refBytes)
		} else {
			fmt.Fprintf(w, "large values: %d of %d bytes, at or under the %d-byte threshold: inline, in every write and read of the item\n",
				p.LargeValues, p.LargeValueBytes, p.OffloadBytes)
		}
	}
	if p.StartQueue {
		fmt.Fprintf(w, "start queue: %d request(s) (the start, %d signal(s), %d completion(s)), each a message of its own, handled by the advance function\n",
			s.QueueRequests, s.Signals, s.Callbacks)
	}
	fmt.Fprintf(w, "per saga: %d action steps (%d chained), %d message(s) handled, %d state writes, %d read(s), %.1f SQS requests, %.2f Lambda invocations, %.5f GB-s\n",
		c.ActionSteps, c.ChainedSteps, c.Messages, c.Requests.DynamoDBWrites, c.Requests.DynamoDBReads, c.Requests.SQS, c.Requests.LambdaInvocations, c.LambdaGBSeconds)
	if p.Chaining() {
		u := e.Unchained
		fmt.Fprintf(w, "without chains: %d message(s) handled, %d read(s), %.1f SQS requests, %.2f Lambda invocations (the writes and the compute are the same)\n",
			u.Messages, u.Requests.DynamoDBReads, u.Requests.SQS, u.Requests.LambdaInvocations)
	}
	index := fmt.Sprintf("on the by_status index (1 at the start, 2 per status change; %d-byte entries)", a.IndexEntryBytes)
	if pauses := s.Timers + s.Parked; pauses > 0 {
		index = fmt.Sprintf("on the indexes (by_status: 1 at the start, 2 per status change, %d-byte entries; by_due: %d, an entry put and deleted per pause)", a.IndexEntryBytes, 2*pauses)
	}
	fmt.Fprintf(w, "DynamoDB per saga: %g WRU on the table (items up to %d bytes: the state and %d bytes of keys and attributes), %g %s, %g RRU\n",
		c.WriteUnits.Table, a.ItemBytes, a.ItemOverheadBytes, c.WriteUnits.Index, index, c.ReadUnits)
	fmt.Fprintf(w, "assumed: %d MB arm64 functions, %s billed per action step, %d-byte state, batch size %g, %d-byte saga ids\n",
		p.MemoryMB, p.Duration, p.StateBytes, p.BatchSize, p.SagaIDBytes)
	perSteps := func(v float64) string {
		if s.ActionSteps == 0 {
			return ""
		}
		return usd(s.PerMillionActionSteps(v))
	}
	row := func(cols ...any) {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("%-26s %14s %16s %20s %15s", cols...), " "))
	}
	fmt.Fprintln(w)
	row("", "per saga", fmt.Sprintf("per %s sagas", human(sagasPerMonth)), "per 1M action steps", "vs lambdasaga")
	for _, k := range Parts() {
		if strings.HasPrefix(k, "s3 ") && !p.Offloaded() {
			continue // no object: no row
		}
		row(k, usd(s.CostBreakdownUSD[k]), usd(s.CostBreakdownUSD[k]*sagasPerMonth), perSteps(s.CostBreakdownUSD[k]), "")
	}
	row("lambdasaga total", usd(s.CostLambdaSaga), usd(s.CostLambdaSaga*sagasPerMonth), perSteps(s.CostLambdaSaga), "")
	times := func(v float64) string {
		if s.CostLambdaSaga == 0 {
			return ""
		}
		return fmt.Sprintf("%.1fx", v/s.CostLambdaSaga)
	}
	if p.Chaining() {
		u := s.Unchained.CostLambdaSaga
		row("lambdasaga without chains", usd(u), usd(u*sagasPerMonth), perSteps(u), times(u))
	}
	for _, ce := range e.Comparisons {
		if !ce.Fits {
			// A price for what the service cannot run would read as an
			// offer: say so instead (Counts says why).
			fmt.Fprintf(w, "%-26s %14s\n", ce.Title, "does not fit")
			continue
		}
		row(ce.Title, usd(ce.USDPerSaga), usd(ce.USDPerMonth), perSteps(ce.USDPerSaga), times(ce.USDPerSaga))
	}
	fmt.Fprintln(w)
	for _, ce := range e.Comparisons {
		fmt.Fprintf(w, "%s: %s.\n", ce.Title, ce.Counts)
	}
}

// reportChains writes which action steps chain, and why the others do
// not: a line per step run, repeats folded.
func (s *Saga) reportChains(w io.Writer) {
	p := s.Params
	if !p.Chaining() {
		fmt.Fprintf(w, "chains: off: every action step is a message of its own\n")
		return
	}
	fmt.Fprintf(w, "chains: %d of %d action step(s) chained, each its write alone (no message, read or invocation); at most %d after a message's own step, %s a chain shared by the batch, %s functions, each action %s\n",
		s.ChainedSteps, s.ActionSteps, p.ChainSteps, p.ChainTime, p.FunctionTimeout, p.Duration)
	line := func(r StepRun) string {
		label := r.Step
		switch {
		case r.Kind == "compensation" || r.Kind == "finding out":
			label += " (" + r.Kind
			if r.Attempt > 1 {
				label += fmt.Sprintf(", attempt %d", r.Attempt)
			}
			label += ")"
		case r.Attempt > 1:
			label += fmt.Sprintf(" (attempt %d)", r.Attempt)
		}
		if r.Child {
			label = "  " + label
		}
		run := r.Kind
		switch {
		case r.Chained:
			run = "chained"
		case r.Attempt > 0:
			run = "message"
		}
		return strings.TrimRight(fmt.Sprintf("  %-28s %-8s %s", label, run, r.Why), " ")
	}
	for i := 0; i < len(s.Steps); {
		l, j := line(s.Steps[i]), i+1
		for j < len(s.Steps) && line(s.Steps[j]) == l {
			j++
		}
		if j-i > 1 {
			l += fmt.Sprintf(" (x%d)", j-i)
		}
		fmt.Fprintln(w, l)
		i = j
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
