package proptest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing/fstest"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A saga with forks runs as a tree of runs: the saga, and its branches,
// iterations and child sagas, each a saga of its own in the store. For
// such a saga the oracle does not predict each delivery's receipt (which
// run of the tree awaits a signal, and when, is the engine's routing,
// engine.Coordinator.Signal); it checks weaker properties that hold
// whatever the routing decides:
//
//   - a delivery is taken (applied or kept) at most once: a delivery
//     whose id was taken before is never taken again, by any run;
//   - a refused or duplicate delivery leaves every run of the tree as it
//     was; an applied one moves the version of the run it names by one,
//     a kept one its kept count by one, and no other run moves;
//   - a signal no await of the tree waits for is refused;
//   - a kept delivery is never lost: when it is in no run's kept list
//     any more, the run that held it last has moved (an await took it,
//     the run ended), and the runs that hold it at once are a run and
//     its ancestors (a parent keeps what it hands to a child until its
//     join).
//
// And over the tree, once the saga is final: every run is final; a fork
// step of a run ends (joins) at most as often as it started; the
// children of a fork that succeeded and are undone are undone highest
// index first, one after the other; each run that ends compensated
// compensated every action of its own that returned success, and when
// the saga ends compensated, so did every run of the tree.

// treeStore is the memory store, recording the id of every saga created
// (branches and iterations are not listed by SagaList).
type treeStore struct {
	*memstore.Store
	mu  sync.Mutex
	ids []string
}

func (s *treeStore) SagaCreate(ctx context.Context, p *durable.SagaCreateParams) error {
	err := s.Store.SagaCreate(ctx, p)
	if err == nil {
		s.mu.Lock()
		s.ids = append(s.ids, p.Record.SagaID)
		s.mu.Unlock()
	}
	return err
}

func (s *treeStore) runIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

// fsys is the case's bundle: prop.yaml and its children.
func (c *Case) fsys() fstest.MapFS {
	m := fstest.MapFS{"prop.yaml": {Data: c.YAML}}
	for name, src := range c.Files {
		m[name] = &fstest.MapFile{Data: src}
	}
	return m
}

// hasForks reports whether a run of plan may start children.
func hasForks(plan *saga.Plan) bool {
	return slices.ContainsFunc(plan.StepsWithChildren(), func(s *lang.Step) bool { return lang.IsFork(s.Kind) })
}

// addPlans adds plan and its children's plans to plans, and by hash to by.
func addPlans(plans *engine.Plans, by map[string]*saga.Plan, plan *saga.Plan) {
	if by[plan.Hash()] != nil {
		return
	}
	by[plan.Hash()] = plan
	plans.Add(plan)
	for _, s := range plan.Steps() {
		if c, ok := plan.Child(s.ID); ok {
			addPlans(plans, by, c)
		}
	}
}

// tree is what the step events tell of a tree's runs.
type tree struct {
	mu        sync.Mutex
	runs      map[string]bool
	succeeded map[string]bool // runs that ended succeeded at some time
	// joins lists, per run/step of a fork, its launches (W) and ends (E:
	// completed, failed, caught) in order: a join is an end after a
	// launch; an end without a launch is a fork that ended as it began
	// (an empty list, a failure before any child).
	joins   map[string][]byte
	kinds   map[string]string // step id -> kind, over the bundle
	signals map[string]string // await step id -> its signal
	// took lists, per run, the versions at which an await ended, by
	// signal: run -> signal -> versions.
	took map[string]map[string][]uint64
}

func newTree(plan *saga.Plan) *tree {
	t := &tree{runs: map[string]bool{}, succeeded: map[string]bool{}, joins: map[string][]byte{}, kinds: map[string]string{}, signals: map[string]string{}, took: map[string]map[string][]uint64{}}
	for _, s := range plan.StepsWithChildren() {
		t.kinds[s.ID] = string(s.Kind)
		if s.Kind == lang.KindAwait {
			t.signals[s.ID] = s.Await.Signal
		}
	}
	return t
}

func (t *tree) heard(e engine.StepEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.runs[e.SagaID] = true
	if e.Status == durable.StatusSucceeded {
		t.succeeded[e.SagaID] = true
	}
	if name := t.signals[e.Step]; name != "" && (e.Outcome == saga.OutcomeCompleted || e.Outcome == saga.OutcomeFailed || e.Outcome == saga.OutcomeCaught) {
		if t.took[e.SagaID] == nil {
			t.took[e.SagaID] = map[string][]uint64{}
		}
		t.took[e.SagaID][name] = append(t.took[e.SagaID][name], e.Version)
	}
	if !lang.IsFork(lang.StepKind(t.kinds[e.Step])) || e.Compensation {
		return
	}
	key := e.SagaID + "/" + e.Step
	switch e.Outcome {
	case saga.OutcomeWaiting:
		t.joins[key] = append(t.joins[key], 'W')
	case saga.OutcomeCompleted, saga.OutcomeFailed, saga.OutcomeCaught:
		t.joins[key] = append(t.joins[key], 'E')
	}
}

func (t *tree) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.runs)
}

// tookAfter reports whether an await of signal name in run ended at a
// version after v.
func (t *tree) tookAfter(run, name string, v uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.ContainsFunc(t.took[run][name], func(at uint64) bool { return at > v })
}

// runSnap is what a delivery may change of one run.
type runSnap struct {
	version, received uint64
	status            durable.Status
	kept              []string // ids of the kept deliveries
}

// snapshot reads every run of the tree.
func (o *oracle) snapshot(ctx context.Context) (map[string]runSnap, map[string]*saga.State) {
	snaps, states := map[string]runSnap{}, map[string]*saga.State{}
	for _, id := range o.store.runIDs() {
		st, err := o.coord.Get(ctx, id)
		if err != nil {
			o.res.violate("a run of the tree unreadable", err)
			continue
		}
		s := runSnap{version: st.Version, received: st.Received, status: st.Status}
		for _, k := range st.Kept {
			s.kept = append(s.kept, k.ID)
		}
		snaps[id], states[id] = s, st
	}
	return snaps, states
}

// deliverTree sends d to a saga with forks and checks the weaker
// properties above. Call it with o.mu held.
func (o *oracle) deliverTree(ctx context.Context, d delivery, early bool) {
	pre, _ := o.snapshot(ctx)
	size := jsonSize(d.payload)
	var got *engine.Delivered
	var err error
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
	post, _ := o.snapshot(ctx)
	o.res.count(kindOf(d)+" (tree)", early, "", nil, got, err)
	id := d.id
	if d.token != "" {
		id = d.token
	}
	receipt := saga.Receipt("")
	target := ""
	if err == nil {
		receipt, target = got.Receipt, got.State.SagaID
	}
	if d.token == "" && !o.awaited[d.signal] && size <= lang.MaxSignalBytes && err == nil {
		o.res.violations("tree: a signal no await of the tree waits for was not refused", fmt.Sprintf("%s: %s by %s", d, receipt, target))
	}
	taken := receipt == saga.ReceiptApplied || receipt == saga.ReceiptKept
	if taken && o.taken[id] != "" {
		o.res.violations("tree: a delivery was taken twice", fmt.Sprintf("%s: taken by %s, then %s by %s", d, o.taken[id], receipt, target))
	}
	for _, run := range sortedKeys(pre) {
		a, b := pre[run], post[run]
		dv, dr := b.version-a.version, b.received-a.received
		switch {
		case taken && run == target && receipt == saga.ReceiptApplied:
			if dv != 1 || dr != 0 {
				o.res.violations("tree: an applied delivery did not move its run's version by one", fmt.Sprintf("%s to %s: version +%d, received +%d", d, run, dv, dr))
			}
		case taken && run == target:
			if dv != 0 || dr != 1 || len(b.kept) != len(a.kept)+1 {
				o.res.violations("tree: a kept delivery did not keep its run's version and count one more kept", fmt.Sprintf("%s to %s: version +%d, received +%d, kept %d -> %d", d, run, dv, dr, len(a.kept), len(b.kept)))
			}
		case dv != 0 || dr != 0:
			what := "a refused or duplicate delivery"
			if taken {
				what = "a delivery taken by one run"
			}
			o.res.violations("tree: "+what+" changed another run of the tree", fmt.Sprintf("%s (%s %v by %q): run %s version +%d, received +%d", d, receipt, errClass0(err), target, run, dv, dr))
		}
	}
	if !taken {
		return
	}
	o.taken[id] = target
	if receipt == saga.ReceiptKept && d.token == "" {
		o.keptBy[id] = keptAt{run: target, version: post[target].version, signal: d.signal}
	}
}

func errClass0(err error) string {
	if err == nil {
		return "no error"
	}
	return errClass(err)
}

// keptAt is where a kept delivery was seen last: the run, at its version,
// and the child of the fork it waits on that it hands the delivery to, if
// any (a child whose await takes it as the child starts is never seen to
// hold it).
type keptAt struct {
	run     string
	version uint64
	signal  string
	child   string
}

// tookAny reports whether an await of signal name in run ended.
func (t *tree) tookAny(run, name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.took[run][name]) > 0
}

// handedChild is the id of the child of the fork st waits on that st
// hands its kept delivery id to as the child starts (saga.Plan.HandedTo);
// "" when none.
func (o *oracle) handedChild(st *saga.State, id string) string {
	plan := o.byHash[st.DefinitionHash]
	cur, ok := st.Pending()
	if plan == nil || !ok || !cur.Fork || cur.Compensating {
		return ""
	}
	for k := range cur.Children {
		for _, d := range plan.HandedTo(st, k) {
			if d.ID == id {
				return durable.ChildID(st.SagaID, plan.StepID(cur.Step), cur.Seq, k)
			}
		}
	}
	return ""
}

// followKept follows the kept signals after a message: each is held by
// one run and its ancestors; once the run that held it last holds it no
// more, an await of its name in that run ended since (took it), or the
// run takes no deliveries any more (it compensates or ended).
func (o *oracle) followKept(ctx context.Context, t *tree) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.keptBy) == 0 {
		return
	}
	snaps, states := o.snapshot(ctx)
	holders := map[string][]string{}
	for _, run := range sortedKeys(snaps) {
		for _, id := range snaps[run].kept {
			holders[id] = append(holders[id], run)
		}
	}
	for _, id := range sortedKeys(o.keptBy) {
		at := o.keptBy[id]
		h := holders[id]
		// A parent keeps a signal it hands to the child that may take
		// it, until its join: the deepest holder is the one that counts,
		// and the others must be its ancestors.
		deepest := ""
		for _, run := range h {
			if len(run) > len(deepest) {
				deepest = run
			}
		}
		switch {
		case slices.ContainsFunc(h, func(run string) bool { return run != deepest && !strings.HasPrefix(deepest, run+".") }):
			o.res.violations("tree: a kept delivery is held by two runs, neither inside the other", fmt.Sprintf("%s held by %s", id, strings.Join(h, ", ")))
			delete(o.keptBy, id)
		case slices.Contains(h, at.run) && !strings.HasPrefix(deepest, at.run+"."):
			at.version = snaps[at.run].version
			at.child = o.handedChild(states[at.run], id)
			o.keptBy[id] = at
		case deepest != "" && strings.HasPrefix(deepest, at.run+"."):
			at.run, at.version = deepest, snaps[deepest].version // handed to a child
			at.child = o.handedChild(states[deepest], id)
			o.keptBy[id] = at
		default:
			s := snaps[at.run]
			takenByChild := at.child != "" && t.tookAny(at.child, at.signal) // as it started
			if !takenByChild && (s.status == durable.StatusRunning || s.status == durable.StatusWaiting) && !t.tookAfter(at.run, at.signal, at.version) {
				o.res.violations("tree: a kept signal was lost: the run that held it holds it no more, and no await of it ended there", fmt.Sprintf("signal %s id %s, held by %s at version %d, now version %d %s; held now by %q", at.signal, id, at.run, at.version, s.version, s.status, strings.Join(h, ", ")))
			}
			delete(o.keptBy, id)
		}
	}
}

// waitingRun is a run of the tree waiting on a pause: an await or a
// callback.
type waitingRun struct {
	st   *saga.State
	step *lang.Step
	cur  saga.Cursor
}

// pausedRuns lists the runs of the tree that wait on a pause, by id.
func (o *oracle) pausedRuns(ctx context.Context) []waitingRun {
	_, states := o.snapshot(ctx)
	var out []waitingRun
	for _, id := range sortedKeys(states) {
		st := states[id]
		if st.Status != durable.StatusWaiting {
			continue
		}
		cur, ok := st.Pending()
		plan := o.byHash[st.DefinitionHash]
		if !ok || cur.Fork || cur.Compensating || plan == nil || cur.Step >= len(plan.Steps()) {
			continue
		}
		s := plan.Steps()[cur.Step]
		if s.Kind == lang.KindAwait || s.Callback != nil {
			out = append(out, waitingRun{st: st, step: s, cur: cur})
		}
	}
	return out
}

// pauseTree ends a pause of the tree: a delivery to one run that waits
// on one, or a timer (the earliest of the tree). It reports whether it
// let time pass.
func (o *oracle) pauseTree(ctx context.Context, clock *durable.ManualClock, queued int) (timeout bool, err error) {
	runs := o.pausedRuns(ctx)
	if len(runs) > 0 && o.deliveries < maxDeliveries {
		w := runs[o.r.IntN(len(runs))]
		x := o.r.Float64()
		switch {
		case w.step.Kind == lang.KindAwait && x < 0.55:
			d := o.signal(w.step.Await.Signal)
			o.deliver(ctx, d, false)
			if o.r.IntN(6) == 0 {
				o.deliver(ctx, d, false)
			}
			return false, nil
		case w.step.Kind == lang.KindAwait && x < 0.65:
			o.deliver(ctx, o.signal(""), false)
			return false, nil
		case w.step.Callback != nil && x < 0.7:
			token := o.runToken(w.st.SagaID, w.step.ID, w.cur)
			if token == "" {
				o.res.violations("tree: a run waits on a callback no action call got the token of", fmt.Sprintf("run %s step %s visit %d attempt %d", w.st.SagaID, w.step.ID, w.cur.Seq, w.cur.Attempt))
				break
			}
			d := delivery{token: token, payload: o.payloadLocked()}
			if o.r.IntN(10) < 3 {
				d.errType, d.payload = []string{"Flaky", "Declined", "Timeout"}[o.r.IntN(3)], nil
			}
			o.deliver(ctx, d, false)
			if o.r.IntN(6) == 0 {
				o.deliver(ctx, d, false)
			}
			return false, nil
		}
	}
	// A timer: the earliest of the runs that wait.
	var wake time.Time
	_, states := o.snapshot(ctx)
	for _, id := range sortedKeys(states) {
		st := states[id]
		if w := st.WakeAt(); st.Status == durable.StatusWaiting && !w.IsZero() && (wake.IsZero() || w.Before(wake)) {
			wake = w
		}
	}
	if queued > 0 || wake.IsZero() || wake.Sub(clock.Now()) > 24*time.Hour*30 {
		clock.Advance(durable.MaxDelay + time.Second)
	} else if d := wake.Sub(clock.Now()); d > 0 {
		clock.Advance(d)
	}
	_, err = o.coord.Tick(ctx, &engine.TickParams{})
	return true, err
}

// runToken is the token the action call of run's step at cur got.
func (o *oracle) runToken(run, step string, cur saga.Cursor) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, t := range sortedKeys(o.tokens) {
		ref := o.tokens[t]
		if ref.run == run && ref.stepID == step && ref.seq == cur.Seq && ref.attempt == cur.Attempt {
			return t
		}
	}
	return ""
}

// finishTree checks the tree once the saga is final (or left waiting).
func (res *Result) finishTree(ctx context.Context, o *oracle, t *tree, steps map[string]*lang.Step, calm bool) {
	_, states := o.snapshot(ctx)
	root := states[sagaID]
	if root == nil {
		return
	}
	final := root.Status.Final()
	for _, id := range sortedKeys(states) {
		st := states[id]
		if final && !st.Status.Final() {
			res.violations("tree: the saga is final but a run of its tree is not", fmt.Sprintf("saga %s, run %s %s", root.Status, id, st.Status))
		}
	}
	t.mu.Lock()
	for _, key := range sortedKeys(t.joins) {
		// Twice in a row after a launch is a second join, in a
		// definition whose forks are visited once (the calm ones have no
		// backward jump); elsewhere a fork may be visited again and end
		// as it begins.
		if seq := string(t.joins[key]); calm && strings.Contains(seq, "WEE") {
			res.violations("tree: a fork joined twice", fmt.Sprintf("%s: launches and ends %s", key, seq))
		}
	}
	succeeded := maps2(t.succeeded)
	t.mu.Unlock()

	// Compensations, run by run.
	forward, compensated := map[string]call{}, map[string]bool{}
	for _, cl := range res.calls {
		switch {
		case cl.Compensation && cl.OK:
			compensated[cl.Key] = true
		case !cl.Compensation && cl.OK:
			forward[cl.Key] = cl
		}
	}
	for _, key := range sortedKeys(forward) {
		cl := forward[key]
		s := steps[cl.Step]
		if s == nil || s.Compensate == nil || compensated[compensationKey(key)] {
			continue
		}
		run := runOf(key)
		if st := states[run]; st != nil && st.Status == durable.StatusCompensated {
			res.violations("tree: a run ended compensated but an action of it that returned success was not compensated", fmt.Sprintf("run %s step %s key %s (%s)", run, cl.Step, key, cl.Behaviour))
		} else if root.Status == durable.StatusCompensated {
			res.violations("tree: the saga ended compensated but an action of its tree that returned success was not compensated", fmt.Sprintf("run %s (%s) step %s key %s", run, statusOf(st), cl.Step, key))
		}
	}
	for _, cl := range res.calls {
		if cl.Compensation && runOf(cl.Key) != sagaID {
			if _, ok := forward[forwardKey(cl.Key)]; !ok {
				res.violations("tree: compensation of a visit whose action never returned success", fmt.Sprintf("run %s step %s key %s", runOf(cl.Key), cl.Step, cl.Key))
				break
			}
		}
	}
	// The undo of the children of a fork that succeeded: highest index
	// first, each child's compensations before the next one's.
	last := map[string]int{} // fork -> index of the child undone last
	done := map[string]bool{}
	for _, cl := range res.calls {
		if !cl.Compensation || !cl.OK {
			continue
		}
		run := runOf(cl.Key)
		if !succeeded[run] || run == sagaID {
			continue
		}
		fork, k, ok := childIndex(run)
		if !ok {
			continue
		}
		if prev, seen := last[fork]; seen && k > prev {
			if !done[fork] {
				res.violations("tree: the children of a fork were undone out of order: a lower index before a higher one", fmt.Sprintf("fork %s: child %d compensated after child %d", fork, k, prev))
				done[fork] = true
			}
			continue
		}
		last[fork] = k
	}
}

func statusOf(st *saga.State) durable.Status {
	if st == nil {
		return "missing"
	}
	return st.Status
}

func maps2(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// runOf is the run an idempotency key (RUN/STEP/VISIT) is of.
func runOf(key string) string {
	i := strings.IndexByte(key, '/')
	if i < 0 {
		return key
	}
	return key[:i]
}

// childIndex splits a child run's id (PARENT.STEP.VISIT.INDEX) into its
// fork (PARENT.STEP.VISIT) and its index.
func childIndex(run string) (string, int, bool) {
	i := strings.LastIndexByte(run, '.')
	if i < 0 {
		return "", 0, false
	}
	k, err := strconv.Atoi(run[i+1:])
	if err != nil {
		return "", 0, false
	}
	return run[:i], k, true
}
