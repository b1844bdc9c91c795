package proptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Outcome says how far a case got.
type Outcome string

const (
	Refused      Outcome = "refused"       // Compile refused the definition
	InputRefused Outcome = "input_refused" // Start refused the input with ErrInvalidInput
	Ran          Outcome = "ran"           // the saga ran (its status says how it ended)
	Crashed      Outcome = "crashed"       // Compile or Start panicked, or Start failed otherwise
)

// Violation is a broken property.
type Violation struct {
	// Class groups violations of one kind: the property and the shape of
	// what happened, without ids, sizes or values.
	Class  string
	Detail string
}

// Result is what one case did.
type Result struct {
	Outcome    Outcome
	Status     durable.Status
	Handled    int // messages handled
	Bound      int // the most messages the saga may take
	Violations []Violation
	// Deliveries counts the signals and callback completions sent, by
	// kind and answer ("signal: kept").
	Deliveries map[string]int
	Timeouts   int  // pauses the driver let time out
	Tree       bool // the saga has forks: the weaker model of tree.go
	Chained    int  // chained steps whose held state was checked against a read (held.go)
	calls      []call
	compileErr error
}

// sagaID is the id every case's saga runs under.
const sagaID = "prop-1"

// Bound is the most messages a saga of n steps may take to end: 200 + 50
// per step.
func Bound(steps int) int { return 200 + 50*steps }

// Run compiles the case's definition and, if Compile accepts it, runs the
// saga on the memory store and queue, and checks the properties.
func Run(c *Case) *Result {
	res := &Result{Outcome: Crashed}
	var plan *saga.Plan
	var err error
	opts := saga.Options{MaxVisits: 50}
	if p := protect(func() {
		if c.Files != nil {
			plan, err = saga.CompileFile(c.fsys(), "prop.yaml", opts)
		} else {
			plan, err = saga.Compile("prop.yaml", c.YAML, opts)
		}
	}); p != nil {
		res.violate("panic in Compile", p)
		return res
	}
	if err != nil {
		var de *lang.DefinitionError
		if !errors.As(err, &de) || len(de.Problems) == 0 {
			res.violate("Compile error without problems", err)
		} else if c.Invalid != "" && !slices.ContainsFunc(de.Problems, func(p lang.Problem) bool { return p.File != "" && p.Line > 0 }) {
			res.violations("Compile refused a definition with "+c.Invalid+" without a file and line", err.Error())
		}
		res.Outcome, res.compileErr = Refused, err
		return res
	}
	if c.Invalid != "" {
		res.violations("Compile accepted a definition with "+c.Invalid, "the mistake written on purpose validated")
	}
	res.Bound = Bound(len(plan.Definition().Steps))
	res.Tree = hasForks(plan)
	var t *tree
	if res.Tree {
		t = newTree(plan)
		res.Bound = Bound(len(plan.StepsWithChildren()))
	}
	if bytes.Contains(c.YAML, []byte(`"${}"`)) {
		// Every "${}" the generator writes is a whole value or condition.
		res.violations("Compile accepted an empty expression", `a value or condition "${}" validated`)
	}

	dec := json.NewDecoder(bytes.NewReader(c.Input))
	dec.UseNumber()
	var input map[string]any
	if err := dec.Decode(&input); err != nil {
		panic(fmt.Sprintf("generated input is not JSON: %v", err))
	}

	clock := durable.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	q := memqueue.New(memqueue.Config{Clock: clock})
	acts := newActions(c)
	jitter := rand.New(rand.NewPCG(c.CallSeed, 2))
	o := newOracle(c, plan, res)
	store := &treeStore{Store: memstore.New()}
	plans := engine.NewPlans(store, opts)
	o.store, o.tree, o.byHash = store, res.Tree, map[string]*saga.Plan{}
	addPlans(plans, o.byHash, plan)
	held := &heldCheck{store: store, byHash: o.byHash, clock: clock, res: res}
	for _, s := range plan.StepsWithChildren() {
		if s.Kind == lang.KindAwait {
			o.awaited[s.Await.Signal] = true
		}
	}
	coord, err := engine.NewCoordinator(engine.CoordinatorConfig{
		Store: store, Plans: plans, Queue: q, Actions: acts, Clock: clock, Rand: jitter.Float64,
		NewID:         func() string { return sagaID },
		BeforeChained: held.before,
		OnStep: func(e engine.StepEvent) {
			if e.Error != nil && (e.Error.Type == lang.ErrorTypeStateTooLarge || e.Error.Type == lang.ErrorTypeOutputFormat) {
				o.relax("a step failed with " + e.Error.Type)
			}
			if t != nil {
				t.heard(e)
			}
		},
	})
	if err != nil {
		panic(err)
	}
	acts.coord, acts.oracle, o.coord = coord, o, coord
	ctx := context.Background()

	var st *saga.State
	if p := protect(func() { st, err = coord.Start(ctx, &engine.StartParams{Plan: plan, SagaID: sagaID, Input: input}) }); p != nil {
		res.violate("panic in Start", p)
		return res
	}
	if err != nil {
		if errors.Is(err, saga.ErrInvalidInput) {
			res.Outcome = InputRefused
			return res
		}
		res.violate("Start failed for an accepted definition and input", err)
		return res
	}
	res.Outcome, res.Status = Ran, st.Status

	resumes := c.Resumes
	cancelled := c.CancelAt < 0
	pauses := 0
	var fired saga.Cursor // the pause whose timer the driver let fire last
	var lastErr error
	for idle := 0; ; {
		if t != nil {
			// Every run of the tree may take as many messages as a saga.
			res.Bound = Bound(len(plan.StepsWithChildren())) + Bound(0)/2*t.size()
		}
		if res.Handled > res.Bound {
			acts.mu.Lock()
			recent := acts.calls[max(0, len(acts.calls)-100):]
			kind := "a hot loop: no action call returned success in the last 100 calls"
			if len(acts.calls) < res.Bound/4 {
				kind = "a hot loop: steps fail before their action is called"
			} else if slices.ContainsFunc(recent, func(c call) bool { return c.OK }) {
				kind = "a long loop: actions keep succeeding"
			}
			acts.mu.Unlock()
			res.violations("no final status within the bound, "+kind,
				fmt.Sprintf("%d messages handled, %d action calls, status %s", res.Handled, len(acts.calls), status(coord)))
			break
		}
		var ds []durable.Delivery
		for _, name := range durable.QueueNames() {
			got, err := q.Receive(ctx, &durable.ReceiveParams{Queue: name, Max: 10})
			if err != nil {
				panic(err)
			}
			ds = append(ds, got...)
		}
		if len(ds) == 0 {
			st, err := coord.Get(ctx, sagaID)
			if err != nil {
				res.violate("saga unreadable", err)
				break
			}
			res.Status = st.Status
			if st.Status == durable.StatusCompensationFailed && resumes > 0 {
				resumes--
				if p := protect(func() { _, err = coord.Resume(ctx, sagaID) }); p != nil {
					res.violate("panic in Resume", p)
					break
				}
				if err != nil {
					res.violate("Resume of a parked saga failed", err)
					break
				}
				continue
			}
			if st.Status.Final() {
				break
			}
			queued := q.Len(durable.QueueAdvance) + q.Len(durable.QueueCompensate)
			if res.Tree && st.Status == durable.StatusWaiting && idle <= 1000 {
				if pauses >= c.Pauses {
					break
				}
				pauses++
				timeout, err := o.pauseTree(ctx, clock, queued)
				if err != nil {
					res.violate("Tick failed", err)
					break
				}
				if timeout {
					res.Timeouts++
					idle++
				}
				continue
			}
			if st.Status == durable.StatusWaiting && idle <= 1000 {
				// A pause: end it with a delivery, or let its timer fire;
				// past the case's pauses, leave the saga waiting.
				if cur, _ := st.Pending(); cur.Step == fired.Step && cur.Seq == fired.Seq && cur.Attempt == fired.Attempt && !clock.Now().Before(st.WakeAt()) {
					res.violations("a pause's timer did not fire", fmt.Sprintf("step %d visit %d attempt %d, due %s, now %s", cur.Step, cur.Seq, cur.Attempt, st.WakeAt(), clock.Now()))
					break
				}
				if pauses >= c.Pauses {
					break
				}
				pauses++
				if o.pause(ctx, st) {
					res.Timeouts++
					fired, _ = st.Pending()
					if err := fire(ctx, coord, clock, st, queued); err != nil {
						res.violate("Tick failed", err)
						break
					}
					idle++
				}
				continue
			}
			if queued == 0 || idle > 1000 {
				dead := q.Len(durable.DeadLetter(durable.QueueAdvance)) + q.Len(durable.DeadLetter(durable.QueueCompensate))
				res.violate(fmt.Sprintf("stuck in %s", st.Status), fmt.Errorf("no message left to handle (%d in dead-letter queues); last handling error: %v", dead, lastErr))
				break
			}
			// Delayed retries and messages whose handling failed come back
			// after their delay or visibility timeout: move time on.
			clock.Advance(durable.MaxDelay + time.Second)
			idle++
			continue
		}
		for _, d := range ds {
			res.Handled++
			var herr error
			if p := protect(func() { _, herr = coord.Handle(ctx, d.Body) }); p != nil {
				res.violate("panic in Handle", p)
				return res.finish(coord, plan, acts)
			}
			if herr != nil {
				lastErr = herr
				continue // it comes back after its visibility timeout
			}
			if err := q.Delete(ctx, &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle}); err != nil {
				panic(err)
			}
			if st, err := coord.Get(ctx, sagaID); err == nil {
				o.moved(st)
				if p := misrouted(plan, st, clock.Now()); p != nil {
					res.violate("panic on a misrouted event", p)
					return res.finish(coord, plan, acts)
				}
			}
			if res.Tree {
				o.followKept(ctx, t)
			}
			if c.SignalRate > 0 && o.deliveries < maxDeliveries && o.r.Float64() < c.SignalRate {
				d := o.signal("")
				o.deliver(ctx, d, false)
				if o.r.IntN(3) == 0 {
					// Another of its name: an await takes the first kept.
					o.deliver(ctx, o.signal(d.signal), false)
				}
			}
			if !cancelled && res.Handled >= c.CancelAt {
				cancelled = true
				o.relax("the driver cancelled the saga")
				var cerr error
				if p := protect(func() { _, cerr = coord.Cancel(ctx, sagaID) }); p != nil {
					res.violate("panic in Cancel", p)
					return res.finish(coord, plan, acts)
				}
				if cerr != nil && !errors.Is(cerr, saga.ErrInvalidEvent) {
					res.violate("Cancel failed", cerr)
				}
			}
		}
	}
	if n := q.Len(durable.DeadLetter(durable.QueueAdvance)) + q.Len(durable.DeadLetter(durable.QueueCompensate)); n > 0 && res.Status.Final() {
		res.violate("message in a dead-letter queue", fmt.Errorf("%d messages; last handling error: %v", n, lastErr))
	}
	res = res.finish(coord, plan, acts)
	if st, err := coord.Get(ctx, sagaID); err == nil {
		o.moved(st)
		o.final(st, res.calls)
	}
	if t != nil {
		steps := map[string]*lang.Step{}
		for _, s := range plan.StepsWithChildren() {
			steps[s.ID] = s
		}
		res.finishTree(ctx, o, t, steps, c.Calm)
	}
	return res
}

func status(coord *engine.Coordinator) durable.Status {
	st, err := coord.Get(context.Background(), sagaID)
	if err != nil {
		return "unreadable"
	}
	return st.Status
}

// finish checks what the fake services saw against how the saga ended.
func (res *Result) finish(coord *engine.Coordinator, plan *saga.Plan, acts *actions) *Result {
	acts.mu.Lock()
	res.calls = slices.Clone(acts.calls)
	cancels := slices.Clone(acts.cancels)
	acts.mu.Unlock()
	for _, err := range cancels {
		var p *panicked
		if errors.As(err, &p) {
			res.violate("panic in Cancel", p)
		}
	}
	compensated := map[string]bool{} // compensation keys that returned success
	var compensations int
	forward := map[string]call{} // successful forward calls by key
	for _, cl := range res.calls {
		if res.Tree && runOf(cl.Key) != sagaID {
			continue // tree.go checks the children's calls
		}
		if cl.Compensation {
			compensations++
			if cl.OK {
				compensated[cl.Key] = true
			}
			continue
		}
		if cl.OK {
			forward[cl.Key] = cl
		}
	}
	if res.Status == durable.StatusSucceeded && compensations > 0 {
		res.violations("succeeded saga ran compensations", fmt.Sprintf("%d compensation calls", compensations))
	}
	if res.Status == durable.StatusCompensated && !res.Tree {
		failure := saga.StepError{Type: "?"}
		if st, err := coord.Get(context.Background(), sagaID); err == nil && st.Failure != nil {
			failure = *st.Failure
		}
		keys := sortedKeys(forward)
		for _, key := range keys {
			cl := forward[key]
			s, ok := plan.Step(cl.Step)
			if !ok || s.Compensate == nil {
				continue
			}
			if !compensated[compensationKey(key)] {
				why := "the saga failed with " + failure.Type
				switch {
				case failure.Step == cl.Step:
					why += " at that step"
				case failure.Step != "":
					why += " at a later step"
				}
				res.violations(fmt.Sprintf("action returned success (%s) but was not compensated; %s", cl.Behaviour.class(), why),
					fmt.Sprintf("step %s visit %s: saga ended compensated without compensating it; the saga failed at step %s: %s", cl.Step, key, failure.Step, firstLines(failure.Message, 1)))
			}
		}
	}
	for _, cl := range res.calls {
		if cl.Compensation && (!res.Tree || runOf(cl.Key) == sagaID) {
			if _, ok := forward[forwardKey(cl.Key)]; !ok {
				res.violations("compensation of a visit whose action never returned success", fmt.Sprintf("step %s key %s", cl.Step, cl.Key))
				break
			}
		}
	}
	return res
}

// class groups behaviours for failure classes: which way of succeeding.
func (b Behaviour) class() string {
	switch b {
	case Big, Half:
		return "large output"
	case Deep:
		return "deep output"
	case Unencoded:
		return "output not JSON"
	case CancelSaga:
		return "saga cancelled while it ran"
	case SlowOK:
		return "returned after its timeout"
	case Echo:
		return "its input echoed"
	}
	return "a small output"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// compensationKey is the idempotency key of the compensation of the visit
// whose key is key: SAGA/STEP/VISIT -> SAGA/STEP.compensate/VISIT.
func compensationKey(key string) string {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return key + ".compensate"
	}
	return key[:i] + ".compensate" + key[i:]
}

func forwardKey(key string) string {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return key
	}
	return strings.TrimSuffix(key[:i], ".compensate") + key[i:]
}

// violations records a violation of a class named in full.
func (res *Result) violations(class, detail string) {
	res.Violations = append(res.Violations, Violation{Class: class, Detail: detail})
}

// violate records a violation whose class is class and the shape of err.
func (res *Result) violate(class string, err error) {
	res.Violations = append(res.Violations, Violation{Class: class + ": " + shape(err), Detail: err.Error()})
}

var (
	numbers = regexp.MustCompile(`[0-9]+`)
	quoted  = regexp.MustCompile(`"[^"]*"|'[^']*'`)
)

// shape is an error's text without numbers and quoted values, cut short:
// errors that differ only there are one class.
func shape(err error) string {
	s := err.Error()
	if p, ok := err.(*panicked); ok {
		s = fmt.Sprint(p.value) + " in " + p.where()
	}
	s = quoted.ReplaceAllString(s, "Q")
	s = numbers.ReplaceAllString(s, "N")
	s = strings.ReplaceAll(s, "saga prop-N", "saga")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

// panicked is a recovered panic with its stack.
type panicked struct {
	value any
	stack []byte
}

// where names the engine function that panicked.
func (p *panicked) where() string {
	_, after, ok := strings.Cut(string(p.stack), "\npanic(")
	if !ok {
		return "?"
	}
	for _, line := range strings.Split(after, "\n") {
		if strings.HasPrefix(line, "github.com/lambdasaga/") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "github.com/lambdasaga/lambdasaga/"), "(0x")
			return name
		}
	}
	return "?"
}

func (p *panicked) Error() string { return fmt.Sprintf("panic: %v\n%s", p.value, p.stack) }

func protect(fn func()) (p *panicked) {
	defer func() {
		if r := recover(); r != nil {
			p = &panicked{value: r, stack: debug.Stack()}
		}
	}()
	fn()
	return nil
}

// Report describes a failing case so that it can be replayed and read.
func (c *Case) Report(res *Result) string {
	var b strings.Builder
	for _, v := range res.Violations {
		fmt.Fprintf(&b, "VIOLATION %s\n  %s\n", v.Class, firstLines(v.Detail, 14))
	}
	if c.Seed != 0 {
		fmt.Fprintf(&b, "replay: go test ./internal/proptest -run TestProperty -seed %d -v\n", c.Seed)
	}
	fmt.Fprintf(&b, "outcome %s, status %s, %d messages handled (bound %d)\n", res.Outcome, res.Status, res.Handled, res.Bound)
	fmt.Fprintf(&b, "--- definition (long runs of one character shortened)\n%s", elide(string(c.YAML)))
	in := c.Input
	if len(in) > 600 {
		in = append(append(slices.Clone(in[:300]), []byte(" ... ")...), in[len(in)-300:]...)
	}
	fmt.Fprintf(&b, "--- input (%d bytes as JSON)\n%s\n", len(c.Input), in)
	fmt.Fprintf(&b, "--- actions (a behaviour is drawn per call; call seed %d)\n", c.CallSeed)
	for _, name := range sortedKeys(c.Profiles) {
		fmt.Fprintf(&b, "  %s: %s\n", name, c.Profiles[name])
	}
	if c.CancelAt >= 0 {
		fmt.Fprintf(&b, "cancel after message %d\n", c.CancelAt)
	}
	fmt.Fprintf(&b, "resumes: %d\n--- calls\n", c.Resumes)
	calls := res.calls
	if len(calls) > 30 {
		fmt.Fprintf(&b, "  (%d calls before these)\n", len(calls)-30)
		calls = calls[len(calls)-30:]
	}
	for _, cl := range calls {
		kind := "action"
		if cl.Compensation {
			kind = "compensation"
		}
		fmt.Fprintf(&b, "  %s %s %s attempt %d key %s: %s\n", kind, cl.Step, cl.Action, cl.Attempt, cl.Key, cl.Behaviour)
	}
	return b.String()
}

var runs = regexp.MustCompile(`x{40,}`)

// elide shortens the long runs of x the generator writes.
func elide(s string) string {
	return runs.ReplaceAllStringFunc(s, func(r string) string { return fmt.Sprintf("xxx<%d x in all>", len(r)) })
}

func firstLines(s string, n int) string {
	if i := strings.Index(s, "\npanic("); i >= 0 {
		// A stack: keep the frames from the one that panicked on.
		if j := strings.Index(s[i+1:], "\n"); j >= 0 {
			s = s[:strings.Index(s, "\n")] + s[i+1+j:]
		}
	}

	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	out := strings.Join(lines, "\n  ")
	if len(out) > 4000 {
		out = out[:4000] + "..."
	}
	return out
}
