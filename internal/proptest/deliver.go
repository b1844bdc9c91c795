package proptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// oracle is the model of deliveries (docs/PROTOCOL.md, signals and
// callbacks): from the saga as read before each delivery it says what
// Receive must answer, and from the deliveries taken it says what the
// final state must hold. It also holds the driver's choices.
type oracle struct {
	mu    sync.Mutex
	plan  *saga.Plan
	steps []*lang.Step
	coord *engine.Coordinator
	r     *rand.Rand
	res   *Result

	serial int
	// seen models State.Seen: the ids of the deliveries taken (applied or
	// kept), the latest last; a callback's id is its token.
	seen []string
	// signals holds the payloads of the signals taken, per name, in order.
	signals map[string][]any
	// keptDone holds the completions kept while their action ran, by
	// token: the payload, or an error.
	keptDone map[string]keptCompletion
	// outs is, per callback step with out, the value its var must hold
	// last: the action's output, or the completion's that replaced it.
	outs map[string]any
	// relaxed says why a var may differ from the model: a cancel while an
	// action ran, a state too large, an output refused.
	relaxMu    sync.Mutex // relax is called from inside the engine (OnStep), under mu
	relaxed    string
	deliveries int
	// timeouts are the pauses the driver let time out, checked once the
	// saga has moved from them.
	timeouts []pauseEnd
	// tokens issued, by token: the attempt they name.
	tokens map[string]tokenRef
	last   string // the latest token issued

	// A saga with forks (tree.go): the weaker model.
	tree    bool
	store   *treeStore
	byHash  map[string]*saga.Plan // the bundle's plans
	awaited map[string]bool       // signals some await of the tree waits for
	taken   map[string]string     // delivery ids taken, and the run that took each
	keptBy  map[string]keptAt     // kept deliveries, and where each was seen last
}

type keptCompletion struct {
	payload any
	failed  bool
}

type tokenRef struct {
	run       string // the run whose call got it
	stepID    string
	step      int
	seq       uint64
	attempt   int
	completed bool // a completion or failure of it was taken
}

// pauseEnd is a pause the driver let time out: what the saga must do
// when its timer fires.
type pauseEnd struct {
	step    int
	seq     uint64
	attempt int
}

// maxDeliveries bounds the deliveries of one run.
const maxDeliveries = 60

func newOracle(c *Case, plan *saga.Plan, res *Result) *oracle {
	return &oracle{
		plan: plan, steps: plan.Definition().Steps, res: res,
		r:       rand.New(rand.NewPCG(c.CallSeed, 3)),
		signals: map[string][]any{}, keptDone: map[string]keptCompletion{}, outs: map[string]any{}, tokens: map[string]tokenRef{},
		awaited: map[string]bool{}, taken: map[string]string{}, keptBy: map[string]keptAt{},
	}
}

// delivery is one signal or callback completion the driver sends.
type delivery struct {
	signal  string
	id      string
	token   string
	errType string // a failed callback
	payload any
}

func (d delivery) String() string {
	switch {
	case d.token != "" && d.errType != "":
		return fmt.Sprintf("fail callback %s with %s", shortToken(d.token), d.errType)
	case d.token != "":
		return fmt.Sprintf("complete callback %s", shortToken(d.token))
	}
	return fmt.Sprintf("signal %s (id %s)", d.signal, d.id)
}

func shortToken(t string) string {
	if len(t) > 16 {
		return t[:16] + "..."
	}
	return t
}

// payload draws a payload: small mostly, sometimes near or past
// lang.MaxSignalBytes, each with its own serial.
func (o *oracle) payload() any {
	o.serial++
	p := map[string]any{"n": o.serial}
	switch x := o.r.IntN(40); {
	case x == 0:
		p["pad"] = strings.Repeat("p", lang.MaxSignalBytes-40+o.r.IntN(80))
	case x == 1:
		p["pad"] = strings.Repeat("q", 4<<10+o.r.IntN(12<<10))
	case x == 2:
		p["list"] = []any{1, "two", nil, true, map[string]any{"k": 2.5}}
	}
	return p
}

// signal draws a signal: the one an await waits for, one of another
// await, or one nothing awaits (refused); sometimes with an id sent before.
func (o *oracle) signal(name string) delivery {
	if name == "" {
		var names, forks []string
		for _, s := range o.plan.StepsWithChildren() {
			if s.Kind == lang.KindAwait && !slices.Contains(names, s.Await.Signal) {
				names = append(names, s.Await.Signal)
			}
		}
		for _, n := range names {
			if !slices.ContainsFunc(o.steps, func(s *lang.Step) bool { return s.Kind == lang.KindAwait && s.Await.Signal == n }) {
				forks = append(forks, n)
			}
		}
		if o.tree && len(forks) > 0 && o.r.IntN(3) > 0 {
			names = forks // mostly signals only the saga's children take
		}
		names = append(names, strayName)
		name = names[o.r.IntN(len(names))]
	}
	o.serial++
	return delivery{signal: name, id: fmt.Sprintf("d%d", o.serial), payload: o.payload()}
}

// predict says what Receive must answer to d for the saga st: a receipt,
// or an error (one of several when the model cannot tell: the kept bytes).
func (o *oracle) predict(st *saga.State, d delivery, size int) (saga.Receipt, []error) {
	if size > lang.MaxSignalBytes {
		return "", []error{saga.ErrBadDelivery}
	}
	id := d.id
	var ref tokenRef
	if d.token != "" {
		var ok bool
		if ref, ok = o.tokens[d.token]; !ok {
			return "", []error{saga.ErrBadToken}
		}
		id = d.token
	}
	if slices.Contains(o.seen, id) {
		return saga.ReceiptDuplicate, nil
	}
	if st.Status != durable.StatusRunning && st.Status != durable.StatusWaiting {
		return "", []error{saga.ErrNotReceiving}
	}
	cur, pending := st.Pending()
	if d.token != "" {
		if !pending || cur.Compensating || cur.Step != ref.step || cur.Seq != ref.seq || cur.Attempt != ref.attempt {
			return "", []error{saga.ErrTokenNotAwaited}
		}
		if cur.Wait && st.Status == durable.StatusWaiting {
			return saga.ReceiptApplied, nil
		}
	} else if pending && cur.Wait && st.Status == durable.StatusWaiting && o.steps[cur.Step].Kind == lang.KindAwait && o.steps[cur.Step].Await.Signal == d.signal {
		return saga.ReceiptApplied, nil
	}
	if st.CancelRequested {
		return "", []error{saga.ErrNotReceiving}
	}
	if d.token == "" && !slices.ContainsFunc(o.steps, func(s *lang.Step) bool { return s.Kind == lang.KindAwait && s.Await.Signal == d.signal }) {
		// No await of the saga can ever take it: refused, never kept.
		return "", []error{saga.ErrNotReceiving}
	}
	if len(st.Kept) >= lang.MaxKeptSignals {
		return "", []error{saga.ErrKeptFull}
	}
	// The kept bytes are measured in the state's encoding: near the
	// limit, and in a large state (no room to keep it), either is right.
	kept := size
	for _, k := range st.Kept {
		kept += jsonSize(k.Payload) + len(k.Signal) + len(k.ID) + 8
	}
	switch {
	case kept > lang.MaxKeptSignalBytes+1024:
		return "", []error{saga.ErrKeptFull}
	case kept > lang.MaxKeptSignalBytes-1024 || jsonSize(st.Vars)+kept > saga.MaxStateBytes/2:
		return saga.ReceiptKept, []error{saga.ErrKeptFull}
	}
	return saga.ReceiptKept, nil
}

func jsonSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// deliver sends d, checks the answer and the saga after it against the
// model, and records what was taken.
func (o *oracle) deliver(ctx context.Context, d delivery, early bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.deliveries++
	if o.tree {
		o.deliverTree(ctx, d, early)
		return
	}
	pre, err := o.coord.Get(ctx, sagaID)
	if err != nil {
		o.res.violate("saga unreadable", err)
		return
	}
	size := jsonSize(d.payload)
	want, wantErrs := o.predict(pre, d, size)
	var got *engine.Delivered
	if p := protect(func() {
		switch {
		case d.token != "" && d.errType != "":
			got, err = o.coord.FailCallback(ctx, d.token, d.errType, "failed by the driver")
		case d.token != "":
			got, err = o.coord.CompleteCallback(ctx, d.token, d.payload)
		default:
			got, err = o.coord.Signal(ctx, &engine.SignalParams{SagaID: sagaID, Name: d.signal, Payload: d.payload, ID: d.id})
		}
	}); p != nil {
		o.res.violate("panic in a delivery", p)
		return
	}
	when := "to a saga " + string(pre.Status)
	if early {
		when += ", its action running"
	}
	if err != nil {
		if !slices.ContainsFunc(wantErrs, func(e error) bool { return errors.Is(err, e) }) {
			o.res.violations(fmt.Sprintf("oracle and engine disagree: %s %s: want %s, got error %s", kindOf(d), when, describe(want, wantErrs), errClass(err)), fmt.Sprintf("%s: %v", d, err))
		}
	} else if got.Receipt != want {
		o.res.violations(fmt.Sprintf("oracle and engine disagree: %s %s: want %s, got %s", kindOf(d), when, describe(want, wantErrs), got.Receipt), d.String())
	}
	post, gerr := o.coord.Get(ctx, sagaID)
	if gerr != nil {
		o.res.violate("saga unreadable", gerr)
		return
	}
	o.res.count(kindOf(d), early, want, wantErrs, got, err)
	receipt := saga.Receipt("")
	if err == nil {
		receipt = got.Receipt
		if got.State.Version != post.Version || got.State.Received != post.Received {
			o.res.violations("a delivery returned a state that is not the stored one", fmt.Sprintf("%s: returned version %d received %d, stored %d %d", d, got.State.Version, got.State.Received, post.Version, post.Received))
		}
	}
	dv, dr := post.Version-pre.Version, post.Received-pre.Received
	switch receipt {
	case saga.ReceiptApplied:
		if dv != 1 || dr != 0 {
			o.res.violations("an applied delivery did not move the version by one", fmt.Sprintf("%s: version +%d, received +%d", d, dv, dr))
		}
	case saga.ReceiptKept:
		if dv != 0 || dr != 1 || len(post.Kept) != len(pre.Kept)+1 {
			o.res.violations("a kept delivery did not keep the version and count one more kept", fmt.Sprintf("%s: version +%d, received +%d, kept %d -> %d", d, dv, dr, len(pre.Kept), len(post.Kept)))
		}
	default:
		if dv != 0 || dr != 0 {
			o.res.violations("a refused or duplicate delivery changed the saga", fmt.Sprintf("%s: version +%d, received +%d", d, dv, dr))
		}
	}
	if receipt != saga.ReceiptApplied && receipt != saga.ReceiptKept {
		return
	}
	if receipt == saga.ReceiptApplied {
		// It ended the pause before its timer fired (a signal sent while
		// the driver moved time on races the timer, as it may).
		cur, _ := pre.Pending()
		o.timeouts = slices.DeleteFunc(o.timeouts, func(p pauseEnd) bool { return p.step == cur.Step && p.seq == cur.Seq && p.attempt == cur.Attempt })
	}
	// Taken: the model follows.
	id := d.id
	if d.token != "" {
		id = d.token
	}
	o.seen = append(o.seen, id)
	if len(o.seen) > 32 {
		o.seen = o.seen[len(o.seen)-32:]
	}
	if d.token == "" {
		o.signals[d.signal] = append(o.signals[d.signal], d.payload)
		return
	}
	ref := o.tokens[d.token]
	ref.completed = true
	o.tokens[d.token] = ref
	s := o.steps[ref.step]
	if receipt == saga.ReceiptKept {
		o.keptDone[d.token] = keptCompletion{payload: d.payload, failed: d.errType != ""}
		return
	}
	if d.errType == "" && s.Out != "" {
		o.outs[s.ID] = d.payload
		if post.Failure == nil || post.Failure.Step != s.ID {
			if v, ok := post.Vars[s.Out]; !ok || !sameJSON(v, d.payload) {
				o.res.violations("a callback completion applied but its output is not in the step's var", fmt.Sprintf("%s: step %s var %s is %s", d, s.ID, s.Out, clip(v)))
			}
		}
	}
}

// count tallies a delivery by kind and answer, for the run's figures.
func (res *Result) count(kind string, early bool, want saga.Receipt, wantErrs []error, got *engine.Delivered, err error) {
	if res.Deliveries == nil {
		res.Deliveries = map[string]int{}
	}
	if early {
		kind += " (early)"
	}
	answer := ""
	if err != nil {
		answer = errClass(err)
	} else {
		answer = string(got.Receipt)
	}
	res.Deliveries[kind+": "+answer]++
}

func kindOf(d delivery) string {
	switch {
	case d.token != "" && d.errType != "":
		return "callback failure"
	case d.token != "":
		return "callback completion"
	case d.signal == strayName:
		return "signal nothing awaits"
	}
	return "signal"
}

func describe(r saga.Receipt, errs []error) string {
	var parts []string
	if r != "" {
		parts = append(parts, string(r))
	}
	for _, e := range errs {
		parts = append(parts, errClass(e))
	}
	return strings.Join(parts, " or ")
}

func errClass(err error) string {
	for _, e := range []error{saga.ErrBadDelivery, saga.ErrBadToken, saga.ErrNotReceiving, saga.ErrKeptFull, saga.ErrTokenNotAwaited, durable.ErrNotFound, durable.ErrConflict} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return shape(err)
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func clip(v any) string {
	s := string(mustJSONOr(v))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func mustJSONOr(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(fmt.Sprintf("%v", v))
	}
	return b
}

// issued records the token an action call got, and the call's outcome.
func (o *oracle) issued(call saga.Call, step int) {
	if call.CallbackToken == "" {
		return
	}
	seq, _ := strconv.ParseUint(call.IdempotencyKey[strings.LastIndexByte(call.IdempotencyKey, '/')+1:], 10, 64)
	o.mu.Lock()
	defer o.mu.Unlock()
	if ref, ok := o.tokens[call.CallbackToken]; ok {
		// The call that finds out an unknown outcome, as the saga
		// compensates, asks again under the last attempt's key and token,
		// numbered after the attempts (saga.Plan.Call): the token stays
		// the attempt's. Any other repeat is two calls on one token.
		if ref.run == call.SagaID && ref.step == step && ref.seq == seq && call.Attempt > ref.attempt {
			o.last = call.CallbackToken
			return
		}
		o.res.violations("two calls got one callback token", fmt.Sprintf("step %s attempt %d", call.Step, call.Attempt))
	}
	o.tokens[call.CallbackToken] = tokenRef{run: call.SagaID, stepID: call.Step, step: step, seq: seq, attempt: call.Attempt}
	o.last = call.CallbackToken
}

// returned records that a callback step's action returned out: its var
// holds out, or the completion kept while it ran.
func (o *oracle) returned(call saga.Call, out any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.plan.Step(call.Step)
	if !ok || s.Out == "" {
		return
	}
	o.outs[s.ID] = out
	if k, ok := o.keptDone[call.CallbackToken]; ok && !k.failed {
		o.outs[s.ID] = k.payload
	}
}

// relax notes a reason the vars may differ from the model.
func (o *oracle) relax(why string) {
	o.relaxMu.Lock()
	defer o.relaxMu.Unlock()
	if o.relaxed == "" {
		o.relaxed = why
	}
}

// pause ends the pause the saga waits in: a delivery, or its timer. It
// reports whether it let the timer fire.
func (o *oracle) pause(ctx context.Context, st *saga.State) (timeout bool) {
	cur, _ := st.Pending()
	s := o.steps[cur.Step]
	if o.deliveries >= maxDeliveries {
		o.timeout(cur)
		return true
	}
	x := o.r.Float64()
	switch {
	case s.Kind == lang.KindAwait && x < 0.55:
		d := o.signal(s.Await.Signal)
		o.deliver(ctx, d, false)
		if o.r.IntN(6) == 0 {
			o.deliver(ctx, d, false) // again: a duplicate
		}
		return false
	case s.Kind == lang.KindAwait && x < 0.65:
		o.deliver(ctx, o.signal(""), false)
		return false
	case s.Callback != nil && x < 0.7:
		token := o.tokenOf(cur)
		if token == "" {
			o.res.violations("a saga waits on a callback no action call got the token of", fmt.Sprintf("step %s visit %d attempt %d", s.ID, cur.Seq, cur.Attempt))
			o.timeout(cur)
			return true
		}
		d := delivery{token: token, payload: o.payload()}
		switch y := o.r.IntN(10); {
		case y < 3:
			d.errType, d.payload = []string{"Flaky", "Declined", "Timeout", lang.ErrorTypeStateTooLarge}[o.r.IntN(4)], nil
		case y == 3:
			// A stale token (an earlier attempt's), or a forged one.
			for t, ref := range o.tokens {
				if t != token && ref.step == cur.Step && (ref.seq != cur.Seq || ref.attempt != cur.Attempt) {
					d.token = t
					break
				}
			}
			if d.token == token {
				d.token = token[:len(token)-2] + "AA"
				if d.token == token {
					d.token = token[:len(token)-2] + "BB"
				}
			}
		}
		o.deliver(ctx, d, false)
		if o.r.IntN(6) == 0 {
			o.deliver(ctx, d, false)
		}
		return false
	}
	o.timeout(cur)
	return true
}

func (o *oracle) tokenOf(cur saga.Cursor) string {
	for t, ref := range o.tokens {
		if ref.step == cur.Step && ref.seq == cur.Seq && ref.attempt == cur.Attempt {
			return t
		}
	}
	return ""
}

func (o *oracle) timeout(cur saga.Cursor) {
	o.timeouts = append(o.timeouts, pauseEnd{step: cur.Step, seq: cur.Seq, attempt: cur.Attempt})
}

// moved checks the pauses let time out that the saga has left: an await
// without catch fails the saga (Timeout, or the deadline or a cancel when
// it came first); one that catches Timeout does not fail with it.
func (o *oracle) moved(st *saga.State) {
	cur, pending := st.Pending()
	kept := o.timeouts[:0]
	for _, p := range o.timeouts {
		if pending && cur.Wait && cur.Step == p.step && cur.Seq == p.seq && cur.Attempt == p.attempt && st.Status == durable.StatusWaiting {
			kept = append(kept, p)
			continue
		}
		s := o.steps[p.step]
		if s.Kind != lang.KindAwait {
			continue
		}
		catches := catchesTimeout(s)
		f := st.Failure
		// A cancel applied before the timer fired wins the race: the saga
		// fails with it, and the timer finds the await gone. A cancel
		// after the timeout finds the saga compensating and changes
		// nothing, so a Cancelled failure means the cancel came first.
		cancelledFirst := f != nil && f.Type == lang.ErrorTypeCancelled
		switch {
		case len(s.Catch) == 0 && !cancelledFirst && (f == nil || f.Step != s.ID || (f.Type != lang.ErrorTypeTimeout && f.Type != lang.ErrorTypeDeadline)):
			o.res.violations("an await without catch timed out but the saga did not fail at it", fmt.Sprintf("step %s: status %s, failure %s", s.ID, st.Status, failureOf(f)))
		case catches && f != nil && f.Step == s.ID && f.Type == lang.ErrorTypeTimeout:
			o.res.violations("an await that catches Timeout failed the saga with it", fmt.Sprintf("step %s: status %s", s.ID, st.Status))
		}
	}
	o.timeouts = kept
}

func catchesTimeout(s *lang.Step) bool {
	for _, c := range s.Catch {
		if slices.Contains(c.Errors, lang.ErrorTypeTimeout) || slices.Contains(c.Errors, "*") {
			return true
		}
	}
	return false
}

func failureOf(f *saga.StepError) string {
	if f == nil {
		return "none"
	}
	return f.Type + " at " + f.Step
}

// final checks the final (or waiting) state against the model: every
// signal name's kept ones are the last taken, in order, and an await's
// var holds the one taken before them; a callback step's var holds what
// its action returned or the completion that replaced it; compensations
// ran newest visit first.
func (o *oracle) final(st *saga.State, calls []call) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.relaxMu.Lock()
	relaxed := o.relaxed
	o.relaxMu.Unlock()
	if o.tree {
		o.compensationOrder(calls)
		return // tree.go checks the tree
	}
	names := sortedKeys(o.signals)
	for _, s := range o.steps {
		if s.Kind == lang.KindAwait && !slices.Contains(names, s.Await.Signal) {
			names = append(names, s.Await.Signal)
		}
	}
	for _, name := range names {
		taken := o.signals[name]
		left := []any{}
		for _, k := range st.Kept {
			if k.Token == "" && k.Signal == name {
				left = append(left, k.Payload)
			}
		}
		k := len(taken) - len(left)
		if k < 0 || !sameJSON(append([]any{}, taken[k:]...), left) {
			o.res.violations("the kept signals of a name are not the last ones taken, in order", fmt.Sprintf("signal %s: taken %s, kept %s", name, clip(taken), clip(left)))
			continue
		}
		if name == strayName && k != 0 {
			o.res.violations("a signal nothing awaits was taken", fmt.Sprintf("%d of %d", k, len(taken)))
		}
		for _, s := range o.steps {
			if s.Kind != lang.KindAwait || s.Await.Signal != name || s.Out == "" {
				continue
			}
			v, has := st.Vars[s.Out]
			switch {
			case k == 0 && has:
				o.res.violations("an await's var is set but it took no signal", fmt.Sprintf("step %s var %s is %s", s.ID, s.Out, clip(v)))
			case k > 0 && relaxed == "" && (!has || !sameJSON(v, taken[k-1])):
				o.res.violations("an await's var is not the payload of the last signal it took", fmt.Sprintf("step %s took %d of %s: var %s is %s, want %s", s.ID, k, clip(taken), s.Out, clip(v), clip(taken[k-1])))
			}
		}
	}
	if relaxed == "" {
		for _, s := range o.steps {
			if s.Callback == nil || s.Out == "" {
				continue
			}
			want, ok := o.outs[s.ID]
			v, has := st.Vars[s.Out]
			switch {
			case !ok && has:
				o.res.violations("a callback step's var is set but its action never returned", fmt.Sprintf("step %s var %s is %s", s.ID, s.Out, clip(v)))
			case ok && (!has || !sameJSON(v, want)):
				o.res.violations("a callback step's var is neither its action's output nor the completion that replaced it", fmt.Sprintf("step %s var %s is %s, want %s", s.ID, s.Out, clip(v), clip(want)))
			}
		}
	}
	o.compensationOrder(calls)
}

// compensationOrder checks that each run compensated newest visit first:
// the first success of each compensation.
func (o *oracle) compensationOrder(calls []call) {
	done := map[string]bool{}
	prev := map[string]uint64{} // by run
	for _, cl := range calls {
		if !cl.Compensation || !cl.OK || done[cl.Key] {
			continue
		}
		done[cl.Key] = true
		seq, err := strconv.ParseUint(cl.Key[strings.LastIndexByte(cl.Key, '/')+1:], 10, 64)
		if err != nil {
			continue
		}
		run := runOf(cl.Key)
		if p := prev[run]; p != 0 && seq >= p {
			o.res.violations("compensations ran out of order: a visit before a later one", fmt.Sprintf("run %s: visit %d compensated after visit %d", run, seq, p))
			return
		}
		prev[run] = seq
	}
}

// fire lets a waiting saga's timer come: within durable.MaxDelay its
// delayed message is in the queue; past it, the tick sends it.
func fire(ctx context.Context, coord *engine.Coordinator, clock *durable.ManualClock, st *saga.State, queued int) error {
	wake := st.WakeAt()
	if queued > 0 || wake.IsZero() {
		clock.Advance(durable.MaxDelay + time.Second)
		return nil
	}
	if d := wake.Sub(clock.Now()); d > 0 {
		clock.Advance(d)
	}
	_, err := coord.Tick(ctx, &engine.TickParams{})
	return err
}

// payloadLocked is payload for the actions, under the oracle's lock.
func (o *oracle) payloadLocked() any {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.payload()
}

// index is the index of the step named id.
func (o *oracle) index(id string) int {
	for i, s := range o.steps {
		if s.ID == id {
			return i
		}
	}
	return -1
}
