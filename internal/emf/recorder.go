package emf

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/cost"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Config sets up a Recorder.
type Config struct {
	// Out gets the lines; default os.Stdout, which Lambda sends to the
	// function's log group, where CloudWatch extracts the metrics.
	Out io.Writer
	// Function is the value of the Function dimension; default the
	// AWS_LAMBDA_FUNCTION_NAME Lambda sets, or "unknown" without it (a
	// dimension's value may not be empty).
	Function string
	// Now stamps the lines and times each record (Charge); default
	// time.Now.
	Now func() time.Time
	// MemoryMB is the function's memory. Set, the Recorder estimates what
	// each saga name's work costs (EstimatedCost): pass the coordinator
	// its Store, Queue and Objects wrappers, and each record to Charge.
	// 0: no estimate.
	MemoryMB int
}

// Record is what a batch handler did with one record of its batch.
type Record int

// What a record came to.
const (
	Handled    Record = iota // done: Lambda deletes it
	Failed                   // reported failed: it comes back
	Malformed                // reported failed, and never handleable: it reaches the dead-letter queue (counts as Failed too)
	HandedBack               // sent again for a fresh invocation, then deleted
	Refused                  // a start queue request that can never be carried out: moved to its dead-letter queue with the reason, then deleted
)

// Recorder collects the metrics of a batch until Flush. It is safe for
// concurrent use. In Lambda an execution environment runs one invocation
// at a time, so a flush writes exactly its batch; if batches run
// concurrently on one Recorder, a flush may carry counts of the other
// batch, but each count is written exactly once, so CloudWatch's sums are
// right either way.
type Recorder struct {
	out      io.Writer
	function string
	now      func() time.Time

	mu      sync.Mutex
	records [5]int64 // by Record
	// conflicts counts the lost conditional writes (see Store).
	conflicts int64
	sagas     []sagaCounts
	sagaIndex map[string]int
	steps     []stepCounts
	stepIndex map[stepKey]int
	// seen holds the transitions whose saga-level outcome is counted:
	// every event of a transition carries it.
	seen   map[transition]struct{}
	line   []byte
	values []value

	memoryMB int
	// known holds each saga read or written since the last flush, by id:
	// its name, for the cost of its work, and the status and timer an
	// update replaces, for the index writes it bills.
	known map[string]knownSaga
	total cost.Usage // the function's, every saga's
}

type sagaCounts struct {
	name                                          string
	started, succeeded, compensated, parked, held int64
	usage                                         cost.Usage
}

type knownSaga struct {
	name   string
	status durable.Status
	wakeAt time.Time
}

type stepKey struct {
	saga, step string
	comp       bool
}

type stepCounts struct {
	key                                stepKey
	completed, retried, failed, caught int64
	durations                          []float64 // milliseconds
}

type transition struct {
	sagaID  string
	version uint64
}

// New returns a Recorder. Pass its OnStep to the coordinator's
// CoordinatorConfig.OnStep and its Store's result as the coordinator's
// Store.
func New(cfg Config) *Recorder {
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.Function == "" {
		cfg.Function = os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
	}
	if cfg.Function == "" {
		cfg.Function = "unknown"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Recorder{out: cfg.Out, function: cfg.Function, now: cfg.Now, memoryMB: cfg.MemoryMB,
		sagaIndex: map[string]int{}, stepIndex: map[stepKey]int{}, seen: map[transition]struct{}{},
		known: map[string]knownSaga{}}
}

// OnStep takes a step event of the coordinator: it counts how the step
// ended, its action's duration, and, once per transition, a saga started
// (the transition wrote version 2), succeeded, compensated or parked.
func (r *Recorder) OnStep(ev engine.StepEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := transition{ev.SagaID, ev.Version}
	if _, ok := r.seen[t]; !ok {
		r.seen[t] = struct{}{}
		r.countSaga(ev)
	}
	if !measured(ev) {
		return
	}
	k := stepKey{ev.SagaName, ev.Step, ev.Compensation}
	i, ok := r.stepIndex[k]
	if !ok {
		i = len(r.steps)
		if i < cap(r.steps) {
			r.steps = r.steps[:i+1] // keeps the durations' backing array
			r.steps[i] = stepCounts{key: k, durations: r.steps[i].durations[:0]}
		} else {
			r.steps = append(r.steps, stepCounts{key: k})
		}
		r.stepIndex[k] = i
	}
	s := &r.steps[i]
	switch ev.Outcome {
	case saga.OutcomeCompleted, saga.OutcomeCompensated:
		s.completed++
	case saga.OutcomeRetrying:
		s.retried++
	case saga.OutcomeFailed, saga.OutcomeCompensationFailed:
		s.failed++
	case saga.OutcomeCaught:
		s.caught++
	}
	if ev.Duration > 0 {
		s.durations = append(s.durations, float64(ev.Duration)/float64(time.Millisecond))
	}
}

// measured reports whether ev is an outcome of a step that runs an action
// (or of its compensation) or awaits a signal: pure steps and the start of
// an action or a wait make no metrics (each step and metric name is a
// custom metric, and billed).
func measured(ev engine.StepEvent) bool {
	switch ev.Outcome {
	case saga.OutcomeStarted, saga.OutcomeWaiting, saga.OutcomeSkipped:
		return false
	}
	return ev.Compensation || ev.Kind == lang.KindAction || ev.Kind == lang.KindAwait
}

func (r *Recorder) countSaga(ev engine.StepEvent) {
	started := ev.Version == 2
	var succeeded, compensated, parked, held bool
	switch ev.Status {
	case durable.StatusSucceeded:
		succeeded = true
	case durable.StatusCompensated:
		compensated = true
	case durable.StatusCompensationFailed:
		parked = true
	case durable.StatusHeld:
		held = true
	}
	if !started && !succeeded && !compensated && !parked && !held {
		return
	}
	s := r.saga(ev.SagaName)
	s.started += b2i(started)
	s.succeeded += b2i(succeeded)
	s.compensated += b2i(compensated)
	s.parked += b2i(parked)
	s.held += b2i(held)
}

// saga returns the counts of the saga name; r.mu is held.
func (r *Recorder) saga(name string) *sagaCounts {
	i, ok := r.sagaIndex[name]
	if !ok {
		i = len(r.sagas)
		r.sagas = append(r.sagas, sagaCounts{name: name})
		r.sagaIndex[name] = i
	}
	return &r.sagas[i]
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Count counts what became of one record of the batch.
func (r *Recorder) Count(what Record) {
	r.mu.Lock()
	r.records[what]++
	if what == Malformed {
		r.records[Failed]++
	}
	r.mu.Unlock()
}

// Store wraps s so that the Recorder counts every SagaUpdate that returns
// durable.ErrConflict: a conditional write that lost to another writer
// (the coordinator then reloads the saga and looks again). With
// Config.MemoryMB it also meters the reads and writes of sagas (cost.go).
// A store's optional capabilities (durable.Pauses, durable.Limiter) pass
// through, so that the engine still finds them by type assertion.
func (r *Recorder) Store(s durable.Store) durable.Store {
	c := &conflictCounter{Store: s, r: r}
	ps, pauses := s.(durable.Pauses)
	lim, limits := s.(durable.Limiter)
	switch {
	case pauses && limits:
		return &struct {
			*conflictCounter
			durable.Pauses
			durable.Limiter
		}{c, ps, lim}
	case pauses:
		return &struct {
			*conflictCounter
			durable.Pauses
		}{c, ps}
	case limits:
		return &struct {
			*conflictCounter
			durable.Limiter
		}{c, lim}
	}
	return c
}

type conflictCounter struct {
	durable.Store
	r *Recorder
}

func (c *conflictCounter) SagaUpdate(ctx context.Context, p *durable.SagaUpdateParams) error {
	err := c.Store.SagaUpdate(ctx, p)
	if errors.Is(err, durable.ErrConflict) {
		c.r.mu.Lock()
		c.r.conflicts++
		c.r.mu.Unlock()
	}
	if c.r.memoryMB > 0 {
		c.r.meterUpdate(&p.Record, err)
	}
	return err
}

func (c *conflictCounter) SagaCreate(ctx context.Context, p *durable.SagaCreateParams) error {
	err := c.Store.SagaCreate(ctx, p)
	if err == nil && c.r.memoryMB > 0 {
		c.r.meterCreate(&p.Record)
	}
	return err
}

func (c *conflictCounter) SagaGet(ctx context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	rec, err := c.Store.SagaGet(ctx, p)
	if err == nil && c.r.memoryMB > 0 {
		c.r.meterGet(rec)
	}
	return rec, err
}

// Flush writes what was collected since the last flush, one line per
// write to Out, and starts over: the function's line always (its counts
// may be zero), a line per saga name with a count that is not, and a line
// per step with a count or a duration (more when it has more than
// MaxValuesPerMetric durations). It returns the first write error; the
// counts are dropped either way.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.now().UnixMilli()
	var errs error
	write := func() {
		if _, err := r.out.Write(r.line); err != nil && errs == nil {
			errs = err
		}
	}
	r.values = append(r.values[:0],
		value{name: RecordsHandled, unit: Count, count: r.records[Handled]},
		value{name: RecordsFailed, unit: Count, count: r.records[Failed]},
		value{name: RecordsMalformed, unit: Count, count: r.records[Malformed]},
		value{name: RecordsHandedBack, unit: Count, count: r.records[HandedBack]},
		value{name: RequestsRefused, unit: Count, count: r.records[Refused]},
		value{name: WriteConflicts, unit: Count, count: r.conflicts})
	if r.memoryMB > 0 {
		r.values = append(r.values, value{name: EstimatedCost, unit: None, number: cost.ListPrices.USD(r.total), isNum: true})
	}
	r.line = appendLine(r.line[:0], ts, functionDims, []label{{key: DimFunction, value: r.function}}, r.values)
	write()
	for _, s := range r.sagas {
		r.values = appendCounts(r.values[:0],
			value{name: SagasStarted, count: s.started}, value{name: SagasSucceeded, count: s.succeeded},
			value{name: SagasCompensated, count: s.compensated}, value{name: SagasParked, count: s.parked},
			value{name: SagasHeld, count: s.held})
		if !s.usage.Zero() {
			r.values = append(r.values, value{name: EstimatedCost, unit: None, number: cost.ListPrices.USD(s.usage), isNum: true})
		}
		r.line = appendLine(r.line[:0], ts, sagaDims, []label{{key: DimSagaName, value: s.name}}, r.values)
		write()
	}
	for _, s := range r.steps {
		suffix := ""
		if s.key.comp {
			suffix = "/compensate"
		}
		labels := []label{{key: DimSagaName, value: s.key.saga}, {key: DimStep, value: s.key.step, suffix: suffix}}
		r.values = appendCounts(r.values[:0],
			value{name: StepCompleted, count: s.completed}, value{name: StepRetried, count: s.retried},
			value{name: StepFailed, count: s.failed}, value{name: StepCaught, count: s.caught})
		durations := s.durations
		for first := true; first || len(durations) > 0; first = false {
			if !first {
				r.values = r.values[:0]
			}
			if n := min(len(durations), MaxValuesPerMetric); n > 0 {
				r.values = append(r.values, value{name: StepDuration, unit: Milliseconds, values: durations[:n]})
				durations = durations[n:]
			}
			r.line = appendLine(r.line[:0], ts, stepDims, labels, r.values)
			write()
		}
	}
	r.records, r.conflicts = [5]int64{}, 0
	r.sagas = r.sagas[:0]
	r.steps = r.steps[:0]
	clear(r.sagaIndex)
	clear(r.stepIndex)
	clear(r.seen)
	clear(r.known)
	r.total = cost.Usage{}
	return errs
}

// appendCounts appends the counts that are not zero, in Count.
func appendCounts(vs []value, counts ...value) []value {
	for _, c := range counts {
		if c.count != 0 {
			c.unit = Count
			vs = append(vs, c)
		}
	}
	return vs
}

// WriteSweep writes the line of one sweep: how many idle sagas it checked,
// re-sent, and left for an operator, by function.
func WriteSweep(w io.Writer, function string, now time.Time, res *engine.SweepResult) error {
	line := appendLine(nil, now.UnixMilli(), functionDims, []label{{key: DimFunction, value: function}}, []value{
		{name: SweepChecked, unit: Count, count: int64(res.Checked)},
		{name: SweepResent, unit: Count, count: int64(res.Resent)},
		{name: SagasLeftForOperator, unit: Count, count: int64(res.LeftForOperator)},
	})
	_, err := w.Write(line)
	return err
}
