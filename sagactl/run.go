package sagactl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// ErrorTypeSimulated is the error type of a failure forced with --fail.
const ErrorTypeSimulated = "SimulatedFailure"

// failSet is what --fail names: action steps that fail for good, and
// steps whose compensation does. The two are kept apart, so a name means
// one thing.
type failSet struct {
	steps map[string]bool // by step id
	comps map[string]bool // by the id of the step compensated
}

func (f failSet) fails(call saga.Call) bool {
	if call.Compensation {
		return f.comps[call.Step]
	}
	return f.steps[call.Step]
}

// act answers a dry run's call: it fails for good if --fail names it, and
// otherwise succeeds with its input as output.
func (f failSet) act(call saga.Call) (any, error) {
	if f.fails(call) {
		return nil, saga.Permanent(saga.NewError(ErrorTypeSimulated, "--fail"))
	}
	return call.Input, nil
}

// checkFails resolves every --fail (resolveFails), printing the first
// name that resolves to nothing.
func (c *Config) checkFails(plan *saga.Plan, names []string) (failSet, bool) {
	set, err := resolveFails(plan.Name(), plan.StepsWithChildren(), names)
	if err != nil {
		c.errorf("%v", err)
		return failSet{}, false
	}
	return set, true
}

// resolveFails resolves what each --fail names among a saga's steps: a
// step id names that step, which must be an action; X.compensate, when no
// step has that id, names the compensation of step X, which must declare
// one. Anything else is refused with the list of the names that resolve,
// in the definition's order.
func resolveFails(sagaName string, steps []*lang.Step, names []string) (failSet, error) {
	byID := make(map[string]*lang.Step, len(steps))
	for _, s := range steps {
		byID[s.ID] = s
	}
	set := failSet{steps: map[string]bool{}, comps: map[string]bool{}}
	for _, name := range names {
		if s, ok := byID[name]; ok {
			if s.Kind != lang.KindAction {
				return failSet{}, fmt.Errorf("--fail %s: step %s is %s %s step; only action steps and their compensations can be made to fail; %s",
					name, s.ID, article(string(s.Kind)), s.Kind, failNames(steps, byID))
			}
			set.steps[s.ID] = true
			continue
		}
		id, comp := strings.CutSuffix(name, ".compensate")
		s, ok := byID[id]
		switch {
		case !comp || !ok:
			return failSet{}, fmt.Errorf("--fail %s: saga %s has no action step or compensation by that name; %s", name, sagaName, failNames(steps, byID))
		case s.Kind != lang.KindAction:
			return failSet{}, fmt.Errorf("--fail %s: step %s is %s %s step; only action steps and their compensations can be made to fail; %s",
				name, s.ID, article(string(s.Kind)), s.Kind, failNames(steps, byID))
		case s.Compensate == nil:
			return failSet{}, fmt.Errorf("--fail %s: step %s declares no compensate; %s", name, s.ID, failNames(steps, byID))
		}
		set.comps[s.ID] = true
	}
	return set, nil
}

// failNames lists what --fail accepts, in the definition's order: each
// action step, then its compensation (unless a step has that very id, as
// validation no longer allows: the name then means the step).
func failNames(steps []*lang.Step, byID map[string]*lang.Step) string {
	var names []string
	for _, s := range steps {
		if s.Kind != lang.KindAction {
			continue
		}
		names = append(names, s.ID)
		if _, taken := byID[s.ID+".compensate"]; s.Compensate != nil && !taken {
			names = append(names, s.ID+".compensate")
		}
	}
	if len(names) == 0 {
		return "the saga has no action step"
	}
	return "--fail takes one of: " + strings.Join(names, ", ")
}

// invoker runs registered actions, simulates the rest (output = input), and
// fails what --fail names. A simulated action of a callback step completes
// its token with its input as output, before it returns (the saga keeps
// the completion and goes on when the action's outcome is written).
type invoker struct {
	reg   *engine.Registry
	fail  failSet
	coord *coordinatorRef
}

// coordinatorRef is the runtime's coordinator, known once it has started.
type coordinatorRef struct{ c *engine.Coordinator }

func (v invoker) Invoke(ctx context.Context, call saga.Call) (any, error) {
	if v.fail.fails(call) {
		what := "step " + call.Step
		if call.Compensation {
			what = "compensation of step " + call.Step
		}
		return nil, saga.Permanent(saga.NewError(ErrorTypeSimulated, what+" failed (--fail)"))
	}
	if v.reg.Has(call.Action) {
		return v.reg.Invoke(ctx, call)
	}
	if call.CallbackToken != "" && v.coord != nil && v.coord.c != nil {
		out := call.Input
		if b, err := json.Marshal(out); err != nil || len(b) > lang.MaxSignalBytes {
			// A completion holds at most 32 KiB: past it, the simulated
			// provider confirms with no output (out becomes null).
			out = nil
		}
		if _, err := v.coord.c.CompleteCallback(ctx, call.CallbackToken, out); err != nil {
			return nil, fmt.Errorf("completing the simulated callback: %w", err)
		}
	}
	return call.Input, nil
}

// runReport is the --json output.
type runReport struct {
	SagaID string         `json:"saga_id"`
	Status durable.Status `json:"status"`
	Output any            `json:"output"`
	// Failure is why the saga compensated; CompensationError why it parked.
	Failure           *saga.StepError `json:"failure,omitempty"`
	CompensationError *saga.StepError `json:"compensation_error,omitempty"`
	Steps             []stepReport    `json:"steps"`
	Compensations     []stepReport    `json:"compensations"`
	// Signals are the --signal sent as the saga started, and what the saga
	// did with each.
	Signals []signalReport `json:"signals,omitempty"`
}

type signalReport struct {
	Name    string       `json:"name"`
	Receipt saga.Receipt `json:"receipt"` // applied, kept, duplicate, or refused (the saga compensates or ended first)
}

// startSignal is a --signal: a name and a compact JSON payload.
type startSignal struct {
	name    string
	payload json.RawMessage
}

// readSignals reads each --signal NAME=JSON or NAME=@FILE, checked as the
// saga will check it; NAME must be the signal of one of the saga's awaits
// (of plan's; with no plan, any name will do).
func (c *Config) readSignals(plan *saga.Plan, args []string) ([]startSignal, bool) {
	var names []string
	awaited := map[string]bool{}
	var steps []*lang.Step
	if plan != nil {
		steps = plan.StepsWithChildren()
	}
	for _, s := range steps {
		if s.Kind == lang.KindAwait && !awaited[s.Await.Signal] {
			awaited[s.Await.Signal] = true
			names = append(names, s.Await.Signal)
		}
	}
	var out []startSignal
	for _, arg := range args {
		name, value, ok := strings.Cut(arg, "=")
		if !ok {
			c.errorf("--signal %s: write NAME=JSON or NAME=@FILE", name)
			return nil, false
		}
		if plan != nil && !awaited[name] {
			what := "it has no await"
			if len(names) > 0 {
				what = "its awaits take: " + strings.Join(names, ", ")
			}
			c.errorf("--signal %s: saga %s awaits no signal of that name; %s", name, plan.Name(), what)
			return nil, false
		}
		payload, ok := c.readPayload("--signal "+name, value)
		if !ok {
			return nil, false
		}
		if err := checkDelivery(&saga.Delivery{Signal: name}, payload); err != nil {
			c.errorf("--signal %s: %v", name, err)
			return nil, false
		}
		out = append(out, startSignal{name, payload})
	}
	return out, true
}

// awaitTimeout is an await's timeout, its default when none is written.
func awaitTimeout(s *lang.Step) time.Duration {
	if s.Await.Timeout == 0 {
		return lang.MaxWait
	}
	return s.Await.Timeout
}

type stepReport struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	label    string // the id, with a fork child's iteration or branch (stepLabel)
}

// runOptions are run's flags.
type runOptions struct {
	input   string
	asJSON  bool
	id      string
	timeout time.Duration
	verbose bool
	fails   stringList
	signals stringList
	be      backendFlags
}

// runSetup is what run has read and checked before anything starts: the
// definition, and the input, --fail and --signal checked against it.
type runSetup struct {
	plan    *saga.Plan
	input   map[string]any
	failing failSet
	signals []startSignal
}

// runRun runs one saga here, in memory or on the emulators, printing its
// steps as they run and how it ended; its exit code says how it ended.
func runRun(c *Config, args []string) int {
	o, files, code, ok := c.runFlags(args)
	if !ok {
		return code
	}
	setup, ok := c.readRunSetup(&o, files)
	if !ok {
		return ExitUsage
	}
	sagaID := o.id
	if sagaID == "" {
		sagaID = randomID()
	}
	rec := newRunRecorder(c, setup.plan, sagaID, o.asJSON)
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	rt, vt, ok := c.startRuntime(ctx, &o, setup.failing, rec.onStep)
	if !ok {
		return ExitUsage
	}
	defer rt.Close()
	if !o.asJSON {
		// Before Start: from then on, workers print steps concurrently.
		fmt.Fprintf(c.Stdout, "saga %s (%s) started\n", sagaID, setup.plan.Name())
	}
	started := time.Now()
	if _, err := rt.Coordinator.Start(ctx, &engine.StartParams{Plan: setup.plan, SagaID: sagaID, Input: setup.input}); err != nil {
		c.errorf("start: %v", err)
		return ExitUsage
	}
	if !c.sendSignals(ctx, rt, rec, setup.signals) {
		return ExitUsage
	}
	st, err := rt.Wait(ctx, sagaID)
	if errors.Is(err, context.DeadlineExceeded) {
		// Not a usage error: the saga did not end in the time given.
		c.stillRunning(&o, sagaID)
		return ExitStillRunning
	}
	if err != nil {
		c.errorf("%v", err)
		return ExitUsage
	}
	return rec.end(setup.plan, st, started, vt)
}

// runFlags parses run's arguments and checks the flags that need no
// definition. It returns the files named; when it returns false, run ends
// with the exit code it returns.
func (c *Config) runFlags(args []string) (runOptions, []string, int, bool) {
	var o runOptions
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&o.input, "input", "", "saga input: JSON, or @FILE")
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object at the end instead of progress")
	fs.StringVar(&o.id, "id", "", "saga id (default: random)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up waiting after this long")
	fs.BoolVar(&o.verbose, "verbose", false, "log every handled message to stderr (ids, step, version, outcome; never values)")
	fs.Var(&o.fails, "fail", "make STEP (or STEP.compensate) fail for good; repeatable")
	fs.Var(&o.signals, "signal", "send the signal NAME=JSON (or NAME=@FILE) as the saga starts; repeatable")
	o.be.register(fs)
	files, code, ok := c.flags(fs, args)
	if !ok {
		return o, nil, code, false
	}
	if !c.checkID(o.id) {
		return o, nil, ExitUsage, false
	}
	if o.timeout <= 0 {
		c.errorf("--timeout: must be positive")
		return o, nil, ExitUsage, false
	}
	if (o.be.dynamoEndpoint == "") != (o.be.sqsEndpoint == "") {
		c.errorf("--dynamodb-endpoint and --sqs-endpoint go together")
		return o, nil, ExitUsage, false
	}
	return o, files, ExitOK, true
}

// readRunSetup loads the one definition in files and checks --input,
// --fail and --signal against it, printing the first problem.
func (c *Config) readRunSetup(o *runOptions, files []string) (runSetup, bool) {
	plan, _, ok := c.oneDefinition("run", files)
	if !ok {
		return runSetup{}, false
	}
	inputLimit, offload := MaxInputFileBytes, 0
	if o.be.offloads() {
		inputLimit, offload = MaxOffloadInputFileBytes, engine.DefaultOffloadBytes
	}
	in, ok := c.readInputWithin(o.input, inputLimit)
	if !ok {
		return runSetup{}, false
	}
	failing, ok := c.checkFails(plan, o.fails)
	if !ok {
		return runSetup{}, false
	}
	signals, ok := c.readSignals(plan, o.signals)
	if !ok {
		return runSetup{}, false
	}
	if _, err := plan.CheckInputWithin(in, offload); err != nil {
		c.errorf("%v", err)
		return runSetup{}, false
	}
	return runSetup{plan: plan, input: in, failing: failing, signals: signals}, true
}

// virtualTime is the clock of a run in memory, where waits and retry
// delays pass at once, and the real time it started at; clock is nil on
// the emulators, where time is real.
type virtualTime struct {
	clock *durable.ManualClock
	start time.Time
}

// printPassed says how much virtual time passed, when a second or more did.
func (vt virtualTime) printPassed(c *Config) {
	if vt.clock == nil {
		return
	}
	if passed := vt.clock.Now().Sub(vt.start); passed >= time.Second {
		fmt.Fprintf(c.Stdout, "(virtual time: its waits and retry delays, %s in all, passed at once)\n", passed.Round(time.Second))
	}
}

// startRuntime starts the runtime that runs the saga: in memory, or on
// the emulators --dynamodb-endpoint and --sqs-endpoint name. Its actions
// are the registered ones, the others simulated, and those --fail names
// fail; onStep hears every step's events.
func (c *Config) startRuntime(ctx context.Context, o *runOptions, failing failSet, onStep func(engine.StepEvent)) (*embedded.Runtime, virtualTime, bool) {
	coord := &coordinatorRef{}
	rtCfg := embedded.Config{Actions: invoker{reg: c.reg, fail: failing, coord: coord}, OnStep: onStep, Visibility: 5 * time.Minute}
	if o.verbose {
		rtCfg.Logger = slog.New(slog.NewTextHandler(c.Stderr, nil))
	}
	if err := o.be.apply(ctx, &rtCfg, c.APIOptions); err != nil {
		c.errorf("%v", err)
		return nil, virtualTime{}, false
	}
	// In memory, the saga runs in virtual time: its waits and retry delays
	// pass at once (on the emulators, in real time).
	var vt virtualTime
	if rtCfg.Store == nil {
		vt.clock = durable.NewManualClock(time.Now())
		rtCfg.Clock = vt.clock
	}
	vt.start = time.Now()
	rt, err := embedded.Start(rtCfg)
	if err != nil {
		c.errorf("%v", err)
		return nil, virtualTime{}, false
	}
	coord.c = rt.Coordinator
	return rt, vt, true
}

// sendSignals sends each --signal to the saga just started, in order,
// and records what the saga did with it. It returns false after printing
// an error when one could not be sent.
func (c *Config) sendSignals(ctx context.Context, rt *embedded.Runtime, rec *runRecorder, signals []startSignal) bool {
	for i, sg := range signals {
		d, err := rt.Signal(ctx, rec.root, sg.name, sg.payload, embedded.SignalID(fmt.Sprintf("run-signal-%d", i+1)))
		receipt := ""
		switch {
		case errors.Is(err, saga.ErrNotReceiving):
			// The saga compensates (a step failed, --fail) or ended before
			// this signal: it is refused, and the saga's outcome follows.
			receipt = "refused"
		case err != nil:
			c.errorf("--signal %s: %s", sg.name, deliveryError(err))
			return false
		default:
			receipt = string(d.Receipt)
		}
		rec.signaled(sg.name, receipt)
	}
	return true
}

// stillRunning says that the saga had not ended at --timeout, and where
// it is left, if anywhere.
func (c *Config) stillRunning(o *runOptions, sagaID string) {
	if o.be.dynamoEndpoint != "" {
		// On the emulators the saga stays, where the commands on
		// sagas find it.
		c.errorf("saga %s still running at --timeout %s; it stays in table %s at --dynamodb-endpoint %s: %s status %s %s",
			sagaID, o.timeout, o.be.table, o.be.dynamoEndpoint, c.Name, sagaID, o.be.where())
		return
	}
	c.errorf("saga %s still running at --timeout %s; its state was in memory and ends with this process (give a longer --timeout, or run it on the emulators with --dynamodb-endpoint and --sqs-endpoint to keep it)",
		sagaID, o.timeout)
}

// runRecorder gathers run's report from the steps' events and the
// signals' receipts, and prints each as it comes unless the report is
// printed as JSON at the end. Workers call it concurrently.
type runRecorder struct {
	c      *Config
	asJSON bool
	root   string                   // the saga's id
	awaits map[string]*lang.Step    // the await steps, by id
	kinds  map[string]lang.StepKind // every step's kind, by id

	mu       sync.Mutex
	report   runReport
	timedOut []string // awaits that got no signal
}

// newRunRecorder makes the recorder of saga sagaID's run of plan.
func newRunRecorder(c *Config, plan *saga.Plan, sagaID string, asJSON bool) *runRecorder {
	r := &runRecorder{
		c: c, asJSON: asJSON, root: sagaID,
		awaits: map[string]*lang.Step{}, kinds: map[string]lang.StepKind{},
		report: runReport{Steps: []stepReport{}, Compensations: []stepReport{}},
	}
	for _, s := range plan.StepsWithChildren() {
		if s.Kind == lang.KindAwait {
			r.awaits[s.ID] = s
		}
	}
	for _, s := range plan.StepsWithChildren() {
		r.kinds[s.ID] = s.Kind
	}
	return r
}

// onStep records a step's event, and prints it.
func (r *runRecorder) onStep(ev engine.StepEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	label := stepLabel(r.root, ev.SagaID, ev.Step, r.kinds)
	rec := stepReport{ID: ev.Step, Status: string(ev.Outcome), Attempts: ev.Attempt, label: label}
	if a, ok := r.awaits[ev.Step]; ok && !ev.Compensation && ev.Error != nil && ev.Error.Type == lang.ErrorTypeTimeout {
		r.timedOut = append(r.timedOut, fmt.Sprintf("await %s got no signal %s: it timed out after %s", a.ID, a.Await.Signal, lang.FormatDuration(awaitTimeout(a))))
	}
	switch {
	case ev.Outcome == saga.OutcomeStarted:
		return
	case ev.Compensation && ev.Outcome != saga.OutcomeRetrying:
		r.report.Compensations = append(r.report.Compensations, rec)
	case !ev.Compensation && ev.Outcome != saga.OutcomeRetrying:
		r.report.Steps = append(r.report.Steps, rec)
	}
	if !r.asJSON {
		printStep(r.c, ev, label)
	}
}

// signaled records what the saga did with --signal name, and prints it.
func (r *runRecorder) signaled(name, receipt string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.report.Signals = append(r.report.Signals, signalReport{Name: name, Receipt: saga.Receipt(receipt)})
	if !r.asJSON {
		note := ""
		if receipt == "refused" {
			note = ": the saga takes no signals now"
		}
		fmt.Fprintf(r.c.Stdout, "  signal %-11s %s%s\n", name, receipt, note)
	}
}

// end prints how the saga ended, in st: the report as JSON, or a summary
// after the steps printed. It returns run's exit code.
func (r *runRecorder) end(plan *saga.Plan, st *saga.State, started time.Time, vt virtualTime) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	st = plan.Redactor(st).State(st) // what is printed shows no secret input
	r.report.SagaID, r.report.Status, r.report.Output = st.SagaID, st.Status, jsonable(st.Output)
	r.report.Failure, r.report.CompensationError = st.Failure, st.CompensationError
	if r.asJSON {
		enc := json.NewEncoder(r.c.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r.report); err != nil {
			r.c.errorf("encode report: %v", err)
			return ExitUsage
		}
	} else {
		printSummary(r.c, st, r.report, time.Since(started))
		for _, line := range r.timedOut {
			fmt.Fprintln(r.c.Stdout, line)
		}
		vt.printPassed(r.c)
	}
	switch st.Status {
	case durable.StatusSucceeded:
		return ExitOK
	case durable.StatusCompensated:
		return ExitCompensated
	case durable.StatusHeld:
		return ExitHeld
	default:
		return ExitCompensationFailed
	}
}

// stepLabel names a step as run shows it: its id, and for a step of a
// fork's child run, the iteration's index (ship_one[0]) or the branch's
// number (hotel (branch 1)), read from the child's id, which
// durable.ChildID makes <parent>.<step>.<visit>.<index> for each fork
// down from root. A child saga's one run adds nothing. An id too long for
// that form is hashed, and only its last index is known.
func stepLabel(root, sagaID, step string, kinds map[string]lang.StepKind) string {
	if sagaID == root || sagaID == "" {
		return step
	}
	rest, ok := strings.CutPrefix(sagaID, root+".")
	parts := strings.Split(rest, ".")
	if !ok || len(parts)%3 != 0 {
		if i := strings.LastIndexByte(sagaID, '.'); i >= 0 {
			return step + "[" + sagaID[i+1:] + "]"
		}
		return step
	}
	label := step
	for i := 0; i < len(parts); i += 3 {
		switch fork, index := parts[i], parts[i+2]; kinds[fork] {
		case lang.KindForeach:
			label += "[" + index + "]"
		case lang.KindParallel:
			n, _ := strconv.Atoi(index)
			label += fmt.Sprintf(" (branch %d)", n+1)
		}
	}
	return label
}

// printStep prints a step's event under label (stepLabel).
func printStep(c *Config, ev engine.StepEvent, label string) {
	name := label
	if ev.Compensation {
		name = "undo " + label
	}
	line := fmt.Sprintf("  %-18s %-20s", name, ev.Outcome)
	if ev.Kind == lang.KindAction || ev.Compensation {
		line += fmt.Sprintf(" attempt %d  %8s", ev.Attempt, ev.Duration.Round(10*time.Microsecond))
	}
	if ev.Outcome == saga.OutcomeRetrying {
		line += fmt.Sprintf("  retry in %s", ev.Delay.Round(time.Millisecond))
	}
	if ev.Error != nil {
		line += "  " + ev.Error.Type + ": " + ev.Error.Message
	}
	fmt.Fprintln(c.Stdout, strings.TrimRight(line, " "))
}

func printSummary(c *Config, st *saga.State, r runReport, took time.Duration) {
	fmt.Fprintf(c.Stdout, "saga %s %s in %s", st.SagaID, st.Status, took.Round(100*time.Microsecond))
	if st.Failure != nil {
		fmt.Fprintf(c.Stdout, ": %s", st.Failure.Error())
	}
	fmt.Fprintln(c.Stdout)
	if len(r.Compensations) > 0 {
		// As they ran, which is not newest first for every saga: a fork's
		// children undo in their own runs, beside the parent's undo.
		var undone []string
		for _, comp := range r.Compensations {
			undone = append(undone, comp.label+" ("+comp.Status+")")
		}
		fmt.Fprintf(c.Stdout, "compensations, in the order they ran: %s\n", strings.Join(undone, ", "))
	}
	if st.CompensationError != nil {
		fmt.Fprintf(c.Stdout, "parked: %s\n", st.CompensationError.Error())
	}
	if st.Status == durable.StatusHeld {
		fmt.Fprintf(c.Stdout, "held for an operator: %s retry %s runs the step again, %s compensate %s undoes the saga\n", c.Name, st.SagaID, c.Name, st.SagaID)
	}
	if st.Status == durable.StatusSucceeded {
		out, _ := json.Marshal(jsonable(st.Output))
		fmt.Fprintf(c.Stdout, "output: %s\n", out)
	}
}

// jsonable turns stored values into what encoding/json prints well.
func jsonable(v any) any {
	switch t := v.(type) {
	case time.Duration:
		return t.String()
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = jsonable(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = jsonable(e)
		}
		return out
	}
	return v
}

func article(word string) string {
	if word != "" && strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "run-" + hex.EncodeToString(b[:])
}
