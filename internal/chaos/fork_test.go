package chaos_test

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing/fstest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/chaos"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// forkEvery: one saga in forkEvery of the kill test is a fork saga
// (fork.yaml), the others the chaos saga. A fork saga makes 5 to 8
// children and 8 to 11 effects: with one in six, the test's 300 sagas
// make about 50 fork sagas and 300 children, and it keeps to its time.
const forkEvery = 6

// forkLanes is fork.yaml's foreach concurrency.
const forkLanes = 3

// The fork steps of fork.yaml in their order, with their visits: f0 is
// visit 1, and each fork one visit (retries keep a visit), so the
// children's ids are durable.ChildID(parent, step, visit, index).
var forkSteps = []struct {
	step  string
	visit uint64
}{{"fan", 2}, {"sub", 3}, {"each", 4}}

// forkScript is what one fork saga does: fail for good at a step (or an
// item of the foreach), run into the deadline once at one, or run slowly
// at one while the test cancels the parent. Its items are the foreach's
// list.
type forkScript struct {
	fail, hang, slow string
	items            []string
}

func drawForkScript(rng *mrand.Rand) forkScript {
	sc := forkScript{}
	for k := range 2 + rng.IntN(4) {
		sc.items = append(sc.items, "i"+strconv.Itoa(k))
	}
	where := []string{"p1", "p2", "p3", "c1", "c2", sc.items[rng.IntN(len(sc.items))], sc.items[len(sc.items)-1]}
	switch r := rng.IntN(100); {
	case r < 30: // succeeds
	case r < 70:
		sc.fail = append(where, "z")[rng.IntN(len(where)+1)]
	case r < 82:
		sc.hang = where[rng.IntN(len(where))]
	default:
		sc.slow = where[rng.IntN(len(where))]
	}
	return sc
}

func (sc forkScript) input() map[string]any {
	items := make([]any, len(sc.items))
	for i, it := range sc.items {
		items[i] = it
	}
	return map[string]any{"fail_at": sc.fail, "hang_at": sc.hang, "slow_at": sc.slow, "items": items}
}

// run is where an effect of fork.yaml runs: "" the parent, else the
// child's id less the parent's ("fan.2.1"); and its step.
type effectAt struct{ run, step string }

// stage of a step or item: 0 f0, 1 the parallel, 2 the child saga, 3 the
// foreach, 4 z; 5 for "" (no step).
func (sc forkScript) stage(at string) int {
	switch {
	case at == "":
		return 5
	case at == "f0":
		return 0
	case strings.HasPrefix(at, "p"):
		return 1
	case strings.HasPrefix(at, "c"):
		return 2
	case at == "z":
		return 4
	}
	return 3
}

// where is the effect a step (or an item) of the script names.
func (sc forkScript) where(at string) effectAt {
	switch {
	case at == "p1":
		return effectAt{"fan.2.0", "p1"}
	case at == "p2" || at == "p3":
		return effectAt{"fan.2.1", at}
	case at == "c1" || at == "c2":
		return effectAt{"sub.3.0", at}
	case at == "f0" || at == "z":
		return effectAt{"", at}
	}
	return effectAt{"each.4." + strconv.Itoa(slices.Index(sc.items, at)), "e"}
}

// effects are every effect of the saga that succeeds, by stage.
func (sc forkScript) effects() [][]effectAt {
	out := [][]effectAt{{{"", "f0"}}, {{"fan.2.0", "p1"}, {"fan.2.1", "p2"}, {"fan.2.1", "p3"}}, {{"sub.3.0", "c1"}, {"sub.3.0", "c2"}}, nil, {{"", "z"}}}
	for k := range sc.items {
		out[3] = append(out[3], effectAt{"each.4." + strconv.Itoa(k), "e"})
	}
	return out
}

// forkRun is what the test saw of one fork saga.
type forkRun struct {
	sc           forkScript
	final        *saga.State
	children     map[string]*saga.State // by run ("fan.2.1")
	cancelLanded bool
}

// forkCheck checks one fork saga, with its ledger entries (its own and its
// children's, by saga id) and its fork records.
type forkCheck struct {
	violate func(inv, format string, args ...any)
	checked map[string]int
	fork    func(key string) (*durable.ForkRecord, error)
	// figures
	undone, selfCompensated, timedOut, hung, cancelled int
	hangCut                                            int // hung attempts cut off before their effect (hangRecorded)
	slowParents                                        int // parents whose own actions timed out unscripted: versions not counted
	// childSpans: from the first to the last effect of a fork saga's
	// children; undoSpans: from the first to the last compensation its
	// parent made (its children undone, then f0). Kills within them
	// landed while children ran, or while they were undone.
	childSpans, undoSpans [][2]time.Time
}

func (fc *forkCheck) check(id string, r *forkRun, ledger map[string][]chaos.Entry) {
	sc, st := r.sc, r.final
	fc.checked["fork_children_final"]++
	for run, ch := range r.children {
		if !ch.Status.Final() {
			fc.violate("fork_children_final", "saga %s (script %+v): child %s is %s (v%d) after its parent ended %s", id, sc, run, ch.Status, ch.Version, st.Status)
		}
	}
	// What the parent should have become.
	fc.checked["fork_status_as_scripted"]++
	cancelled := sc.slow != ""
	switch {
	case cancelled && !r.cancelLanded:
		fc.violate("fork_status_as_scripted", "saga %s (script %+v): the cancel never found %s pending (status %s)", id, sc, sc.slow, st.Status)
		return
	case cancelled:
		fc.cancelled++
		if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Type != lang.ErrorTypeCancelled {
			fc.violate("fork_status_as_scripted", "saga %s (script %+v): %s (%+v), want compensated after its cancel", id, sc, st.Status, st.Failure)
		}
	case sc.fail != "":
		if want := sc.where(sc.fail).step; st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Step != want {
			fc.violate("fork_status_as_scripted", "saga %s (script %+v): %s (%+v), want compensated, %s failed", id, sc, st.Status, st.Failure, want)
		}
	default:
		if st.Status != durable.StatusSucceeded {
			fc.violate("fork_status_as_scripted", "saga %s (script %+v): %s (%+v), want succeeded", id, sc, st.Status, st.Failure)
		}
	}
	succeeded := st.Status == durable.StatusSucceeded

	// The effects, by run and step: each at most once.
	dos, undos := map[effectAt]chaos.Entry{}, map[effectAt][]chaos.Entry{}
	runOf := func(sagaID string) string {
		if sagaID == id {
			return ""
		}
		return strings.TrimPrefix(sagaID, id+".")
	}
	var all []chaos.Entry
	for sagaID, es := range ledger {
		if sagaID != id && !strings.HasPrefix(sagaID, id+".") {
			continue
		}
		for _, e := range es {
			at := effectAt{runOf(sagaID), e.Step}
			all = append(all, e)
			if e.Phase == "do" {
				fc.checked["fork_effects_once_per_completed_step"]++
				if prev, dup := dos[at]; dup {
					fc.violate("fork_effects_once_per_completed_step", "saga %s: %s of %s done twice, by keys %s and %s", id, at.step, sagaID, prev.Key, e.Key)
				}
				dos[at] = e
			} else {
				undos[at] = append(undos[at], e)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Seq < all[j].Seq })
	var ofChildren, parentUndos []chaos.Entry
	for _, e := range all {
		ch := r.children[runOf(e.Saga)]
		if e.Saga != id {
			ofChildren = append(ofChildren, e)
		}
		if e.Phase == "undo" && (ch == nil || ch.Undoing) {
			parentUndos = append(parentUndos, e)
		}
	}
	if s, ok := span(ofChildren); ok {
		fc.childSpans = append(fc.childSpans, s)
	}
	if s, ok := span(parentUndos); ok {
		fc.undoSpans = append(fc.undoSpans, s)
	}
	stages := sc.effects()
	// Stages after the failure (or the cancel) never start.
	last := sc.stage(sc.fail)
	if cancelled {
		last = sc.stage(sc.slow)
	}
	for s, effs := range stages {
		for _, at := range effs {
			_, done := dos[at]
			switch {
			case succeeded && !done:
				fc.violate("fork_effects_once_per_completed_step", "saga %s (script %+v) succeeded without the effect of %s in run %q", id, sc, at.step, at.run)
			case done && (s > last || at == sc.where(sc.fail)):
				fc.violate("fork_effects_once_per_completed_step", "saga %s (script %+v): %s in run %q ran past the failure", id, sc, at.step, at.run)
			case !done && s < last && !cancelled:
				fc.violate("fork_effects_once_per_completed_step", "saga %s (script %+v): no effect of %s in run %q, before the failure", id, sc, at.step, at.run)
			}
		}
	}
	for at := range dos {
		if !slices.Contains(slices.Concat(stages...), at) {
			fc.violate("fork_effects_once_per_completed_step", "saga %s: an effect of %s in run %q, which fork.yaml has not", id, at.step, at.run)
		}
	}
	for i, f := range forkSteps {
		for run := range r.children {
			if i+1 > last && strings.HasPrefix(run, f.step+".") {
				fc.violate("fork_effects_once_per_completed_step", "saga %s (script %+v): fork %s started (child %s) after the failure", id, sc, f.step, run)
			}
		}
	}
	if sc.hang != "" {
		at := sc.where(sc.hang)
		if e, ok := dos[at]; ok {
			fc.hung++
			fc.checked["fork_deadline_attempt_recorded"]++
			run := st
			if at.run != "" {
				run = r.children[at.run]
			}
			if cut, ok := hangRecorded(e, run); !ok {
				fc.violate("fork_deadline_attempt_recorded", "saga %s: %s should have been called again after running into the deadline, its attempt 1 recorded as a Timeout (%+v)", id, sc.hang, e)
			} else if cut {
				fc.hangCut++
			}
		}
	}

	// The output: the children's outputs, in order.
	if succeeded {
		fc.checked["fork_output_in_order"]++
		want := map[string]any{"fan": []any{"p1", "p3"}, "sub": []any{"c1", "c2"}, "each": toAny(sc.items)}
		if !reflect.DeepEqual(st.Output, want) {
			fc.violate("fork_output_in_order", "saga %s: output %v, want %v", id, st.Output, want)
		}
	}

	// Compensation: every compensable effect undone exactly once (one
	// key), each run's newest first; an effect whose call ran into the
	// deadline on its last attempt, or while a cancel waited, is found out
	// under its key as its run compensates, and undone.
	fc.checked["fork_compensated_exactly_once"]++
	for at, us := range undos {
		d, ok := dos[at]
		switch {
		case succeeded:
			fc.violate("fork_compensated_exactly_once", "saga %s succeeded and %s of run %q was compensated", id, at.step, at.run)
		case !ok:
			fc.violate("fork_compensated_exactly_once", "saga %s: %s of run %q compensated, never done", id, at.step, at.run)
		case len(us) != 1:
			fc.violate("fork_compensated_exactly_once", "saga %s: %s of run %q compensated %d times (keys %v)", id, at.step, at.run, len(us), keys(us))
		case !d.Returned:
			fc.violate("fork_compensated_exactly_once", "saga %s: %s of run %q compensated, its call never returned", id, at.step, at.run)
		case us[0].Seq < d.Seq:
			fc.violate("fork_compensated_exactly_once", "saga %s: %s of run %q compensated before it was done", id, at.step, at.run)
		}
	}
	if !succeeded {
		for at, d := range dos {
			switch {
			case at.step == "z":
			case !d.Returned:
				fc.timedOut++
				fc.violate("fork_compensated_exactly_once", "saga %s (script %+v) compensated and the effect of %s of run %q was never found out (no call under its key returned)", id, sc, at.step, at.run)
			case len(undos[at]) == 0:
				child := "the parent"
				if ch := r.children[at.run]; ch != nil {
					child = fmt.Sprintf("run %s at v%d, %s, cancel requested %v, failure %v", at.run, ch.Version, ch.Status, ch.CancelRequested, ch.Failure)
				}
				fc.violate("fork_compensated_exactly_once", "saga %s (script %+v) compensated and %s of run %q was left in place (called %d times under its key; %s)", id, sc, at.step, at.run, d.Calls, child)
			}
		}
	}

	// Order: a child that compensated itself (it failed, or was
	// cancelled) did so before the join, so before the parent undid any
	// child; the parent undid its children one after the other, the
	// latest fork first and the highest index first, then f0; each run's
	// compensations newest first.
	if !succeeded {
		fc.checked["fork_undo_order"]++
		var want, got []string
		lastSelf := int64(-1)
		for _, e := range all {
			if e.Phase != "undo" {
				continue
			}
			run := runOf(e.Saga)
			if ch := r.children[run]; ch != nil && !ch.Undoing {
				lastSelf = max(lastSelf, e.Seq)
				continue
			}
			got = append(got, run+"/"+e.Step)
		}
		stack := []effectAt{}
		if _, ok := dos[effectAt{"", "f0"}]; ok {
			stack = append(stack, effectAt{"", "f0"})
		}
		for _, effs := range stages[1:4] {
			runs := []string{}
			for _, at := range effs {
				if !slices.Contains(runs, at.run) {
					runs = append(runs, at.run)
				}
			}
			for _, run := range runs {
				if ch := r.children[run]; ch == nil || !ch.Undoing {
					continue
				}
				fc.undone++
				for _, at := range effs {
					if _, ok := dos[at]; ok && at.run == run {
						stack = append(stack, at)
					}
				}
			}
		}
		slices.Reverse(stack)
		for _, at := range stack {
			if dos[at].Returned {
				want = append(want, at.run+"/"+at.step)
			}
		}
		first := int64(-1)
		for _, e := range all {
			if e.Phase == "undo" {
				if ch := r.children[runOf(e.Saga)]; ch == nil || ch.Undoing {
					first = e.Seq
					break
				}
			}
		}
		if !slices.Equal(got, want) {
			fc.violate("fork_undo_order", "saga %s (script %+v): the parent undid %v, want %v", id, sc, got, want)
		}
		if first >= 0 && lastSelf > first {
			fc.violate("fork_undo_order", "saga %s (script %+v): a child compensated itself (ledger %d) after the parent began undoing (ledger %d)", id, sc, lastSelf, first)
		}
		for run, ch := range r.children {
			if !ch.Undoing && ch.Status == durable.StatusCompensated {
				fc.selfCompensated++
			}
			var mine, wantMine []string
			for _, e := range all {
				if runOf(e.Saga) == run && e.Phase == "undo" {
					mine = append(mine, e.Step)
				}
			}
			for _, e := range all {
				if runOf(e.Saga) == run && e.Phase == "do" && e.Returned && e.Step != "z" {
					wantMine = append(wantMine, e.Step)
				}
			}
			slices.Reverse(wantMine)
			if !slices.Equal(mine, wantMine) {
				fc.violate("fork_undo_order", "saga %s: child %s compensated %v, want %v", id, run, mine, wantMine)
			}
		}
	}

	// Versions: every transition of the parent wrote one version, so a
	// join applied twice (or an undone child counted twice) shows. The
	// start; f0's end (it forks); one join per fork started; z's end; the
	// cancel; one transition per child undone; f0's compensation.
	joins := 0
	for _, f := range forkSteps {
		for run := range r.children {
			if strings.HasPrefix(run, f.step+".") {
				joins++
				break
			}
		}
	}
	want := 1 + 1 + joins
	if _, ok := dos[effectAt{"", "z"}]; ok || sc.fail == "z" {
		want++
	}
	if r.cancelLanded {
		want++
	}
	for _, ch := range r.children {
		if ch.Undoing {
			want++
		}
	}
	want += len(undos[effectAt{"", "f0"}])
	if n, ok := timedOutAndRetried(st); !ok || n > 0 {
		// f0 or z ran into a timeout the script never asks for (a slow
		// machine): its retry's version is not the script's to count.
		fc.slowParents++
	} else {
		fc.checked["fork_join_once"]++
		if st.Version != uint64(want) {
			fc.violate("fork_join_once", "saga %s (script %+v) is at version %d, want %d (%d joins; history %s)", id, sc, st.Version, want, joins, historyLine(st))
		}
	}

	// The fork records: a fork that succeeded counted each child once;
	// the one that failed keeps its first failed child.
	sizes := []int{2, 1, len(sc.items)}
	for i, f := range forkSteps {
		if i+1 > last {
			continue
		}
		rec, err := fc.fork(durable.ForkKey(id, f.step, f.visit))
		if err != nil {
			fc.violate("fork_record_counts", "saga %s (script %+v): fork %s: %v", id, sc, f.step, err)
			continue
		}
		fc.checked["fork_record_counts"]++
		n := sizes[i]
		lanes := n
		if f.step == "each" {
			lanes = min(n, forkLanes)
		}
		if i+1 < last || succeeded {
			for j := range lanes {
				if want := (n - j + lanes - 1) / lanes; rec.Count(j) != want || rec.IsStopped(j) || rec.Failed >= 0 {
					fc.violate("fork_record_counts", "saga %s: fork %s that succeeded: lane %d counted %d, stopped %v, failed %d; want %d, no stop, no failure", id, f.step, j, rec.Count(j), rec.IsStopped(j), rec.Failed, want)
				}
			}
			continue
		}
		// The fork that failed: its first failed child, or past the last
		// for a cancel of the parent.
		k := n
		if !cancelled {
			k = 0
			if f.step == "each" {
				k = slices.Index(sc.items, sc.fail)
			} else if sc.where(sc.fail).run == "fan.2.1" {
				k = 1
			}
		}
		if cancelled && rec.Failed == -1 {
			// The children all ended and the fork joined before the
			// cancel's stop was handled: the stop was stale by design
			// (engine/fork_stop.go), and the parent undoes the children
			// it joined. Then every lane counted all its children.
			for j := range lanes {
				if want := (n - j + lanes - 1) / lanes; rec.Count(j) != want {
					fc.violate("fork_record_counts", "saga %s (script %+v): fork %s cancelled, its record says no stop, but lane %d counted %d of %d children (a join before the stop counts them all)", id, sc, f.step, j, rec.Count(j), want)
				}
			}
			continue
		}
		if rec.Failed != k {
			fc.violate("fork_record_counts", "saga %s (script %+v): fork %s failed by child %d, its record holds %d", id, sc, f.step, k, rec.Failed)
		}
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func keys(es []chaos.Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Key)
	}
	return out
}

// forkBundle is fork.yaml with its child saga, as one definition.
func forkBundle() ([]byte, error) {
	fsys := fstest.MapFS{}
	for _, name := range []string{"fork.yaml", "fork-child.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		fsys[name] = &fstest.MapFile{Data: b}
	}
	plan, err := saga.CompileFile(fsys, "fork.yaml", saga.Options{})
	if err != nil {
		return nil, err
	}
	return plan.Source(), nil
}

// forkChildren reads the children of the fork sagas from the table (every
// saga item whose id extends a parent's), by parent and run.
func forkChildren(ctx context.Context, ddb *dynamodb.Client, table string, cl *client.Client, parents map[string]bool) (map[string]map[string]*saga.State, error) {
	out := map[string]map[string]*saga.State{}
	var ids []string
	var start map[string]types.AttributeValue
	for {
		page, err := ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true),
			ProjectionExpression: aws.String("pk")})
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			pk, _ := it["pk"].(*types.AttributeValueMemberS)
			if id, ok := strings.CutPrefix(pk.Value, "SAGA#"); ok && strings.Contains(id, ".") {
				ids = append(ids, id)
			}
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		start = page.LastEvaluatedKey
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	sem := make(chan struct{}, 16)
	for _, id := range ids {
		parent, run, _ := strings.Cut(id, ".")
		if !parents[parent] {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			st, err := cl.Status(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("child %s: %w", id, err))
				return
			}
			if out[parent] == nil {
				out[parent] = map[string]*saga.State{}
			}
			out[parent][run] = st
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// cancelDuringChild cancels fork saga id once the child running its slow
// step has that step pending (its action running, or about to): the
// cancel lands while the parent waits on the fork. It reports whether a
// cancel landed.
func cancelDuringChild(ctx context.Context, cl *client.Client, id string, sc forkScript) bool {
	w := sc.where(sc.slow)
	child := ""
	for _, f := range forkSteps {
		if rest, ok := strings.CutPrefix(w.run, f.step+"."); ok {
			_, k, _ := strings.Cut(rest, ".")
			n, _ := strconv.Atoi(k)
			child = durable.ChildID(id, f.step, f.visit, n)
		}
	}
	for end := time.Now().Add(settleFor); time.Now().Before(end) && ctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		if p, err := cl.Status(ctx, id); err == nil && p.Status.Final() {
			return false
		}
		st, err := cl.Status(ctx, child)
		if err != nil {
			continue
		}
		cur, ok := st.Pending()
		if pending, _ := cl.Step(ctx, st, cur.Step); !ok || pending != w.step {
			continue
		}
		_, err = cl.Cancel(ctx, id)
		return err == nil
	}
	return false
}

// killTimes are the times of the kill test's kills.
type killTimes struct {
	mu sync.Mutex
	at []time.Time
}

func (k *killTimes) kill() {
	k.mu.Lock()
	k.at = append(k.at, time.Now())
	k.mu.Unlock()
}

// during counts the kills that fell within one of spans.
func (k *killTimes) during(spans [][2]time.Time) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, t := range k.at {
		if slices.ContainsFunc(spans, func(s [2]time.Time) bool { return !t.Before(s[0]) && !t.After(s[1]) }) {
			n++
		}
	}
	return n
}

// span is the first and last time of es; ok is false when es is empty.
func span(es []chaos.Entry) (s [2]time.Time, ok bool) {
	for i, e := range es {
		if i == 0 || e.At.Before(s[0]) {
			s[0] = e.At
		}
		if i == 0 || e.At.After(s[1]) {
			s[1] = e.At
		}
	}
	return s, len(es) > 0
}
