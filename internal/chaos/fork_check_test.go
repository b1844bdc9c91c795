package chaos_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/chaos"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// forkWorld is a fork saga as the kill test would read it, made by hand:
// every effect of fork.yaml with two items, each once, in order; with
// fail "z", z fails and every child is undone by the parent, the latest
// fork first, then f0.
func forkWorld(fail string) (*forkRun, map[string][]chaos.Entry, map[string]*durable.ForkRecord) {
	sc := forkScript{fail: fail, items: []string{"i0", "i1"}}
	r := &forkRun{sc: sc, children: map[string]*saga.State{}}
	ledger := map[string][]chaos.Entry{}
	seq := int64(0)
	add := func(run, step, phase string) {
		seq++
		id := "f"
		if run != "" {
			id += "." + run
		}
		ledger[id] = append(ledger[id], chaos.Entry{Key: fmt.Sprintf("%s/%s/%s", id, step, phase), Saga: id, Step: step, Phase: phase, Seq: seq, Calls: 1, Returned: phase == "do", At: time.Unix(seq, 0)})
	}
	for _, s := range sc.effects() {
		for _, at := range s {
			if at.step != "z" {
				add(at.run, at.step, "do")
			}
		}
	}
	compensated := fail == "z"
	for _, run := range []string{"fan.2.0", "fan.2.1", "sub.3.0", "each.4.0", "each.4.1"} {
		st := &saga.State{SagaID: "f." + run, Status: durable.StatusSucceeded}
		if compensated {
			st.Status, st.Undoing = durable.StatusCompensated, true
		}
		r.children[run] = st
	}
	r.final = &saga.State{SagaID: "f", Status: durable.StatusSucceeded, Version: 6,
		Output: map[string]any{"fan": []any{"p1", "p3"}, "sub": []any{"c1", "c2"}, "each": []any{"i0", "i1"}}}
	if !compensated {
		add("", "z", "do")
	} else {
		for _, u := range [][2]string{{"each.4.1", "e"}, {"each.4.0", "e"}, {"sub.3.0", "c2"}, {"sub.3.0", "c1"}, {"fan.2.1", "p3"}, {"fan.2.1", "p2"}, {"fan.2.0", "p1"}, {"", "f0"}} {
			add(u[0], u[1], "undo")
		}
		// start, f0, 3 joins, z failed, 5 children undone, f0 undone
		r.final = &saga.State{SagaID: "f", Status: durable.StatusCompensated, Version: 12, Failure: &saga.StepError{Step: "z", Type: "Refused"}}
	}
	records := map[string]*durable.ForkRecord{
		durable.ForkKey("f", "fan", 2):  {Counts: []int{1, 1}, Failed: -1},
		durable.ForkKey("f", "sub", 3):  {Counts: []int{1}, Failed: -1},
		durable.ForkKey("f", "each", 4): {Counts: []int{1, 1}, Failed: -1},
	}
	return r, ledger, records
}

func runForkCheck(r *forkRun, ledger map[string][]chaos.Entry, records map[string]*durable.ForkRecord) map[string]int {
	violated := map[string]int{}
	fc := &forkCheck{checked: map[string]int{}, violate: func(inv, _ string, _ ...any) { violated[inv]++ },
		fork: func(key string) (*durable.ForkRecord, error) {
			if rec, ok := records[key]; ok {
				return rec, nil
			}
			return nil, durable.ErrNotFound
		}}
	fc.check("f", r, ledger)
	return violated
}

// The kill test's fork checks pass a fork saga that ran as it should, and
// each fails on the defect it is there to catch.
func TestForkChecksCatchDefects(t *testing.T) {
	for _, fail := range []string{"", "z"} {
		if v := runForkCheck(forkWorld(fail)); len(v) > 0 {
			t.Errorf("fail %q: a fork saga that ran right violates %v", fail, v)
		}
	}
	cases := []struct {
		name, fail, want string
		spoil            func(*forkRun, map[string][]chaos.Entry, map[string]*durable.ForkRecord)
	}{
		{"a join applied twice", "", "fork_join_once", func(r *forkRun, _ map[string][]chaos.Entry, _ map[string]*durable.ForkRecord) {
			r.final.Version++
		}},
		{"outputs out of order", "", "fork_output_in_order", func(r *forkRun, _ map[string][]chaos.Entry, _ map[string]*durable.ForkRecord) {
			r.final.Output.(map[string]any)["each"] = []any{"i1", "i0"}
		}},
		{"a child left running", "", "fork_children_final", func(r *forkRun, _ map[string][]chaos.Entry, _ map[string]*durable.ForkRecord) {
			r.children["each.4.1"].Status = durable.StatusRunning
		}},
		{"an effect done twice", "", "fork_effects_once_per_completed_step", func(r *forkRun, l map[string][]chaos.Entry, _ map[string]*durable.ForkRecord) {
			e := l["f.fan.2.1"][0]
			e.Key += "-again"
			l["f.fan.2.1"] = append(l["f.fan.2.1"], e)
		}},
		{"a child counted twice", "", "fork_record_counts", func(_ *forkRun, _ map[string][]chaos.Entry, recs map[string]*durable.ForkRecord) {
			recs[durable.ForkKey("f", "each", 4)].Counts[1] = 2
		}},
		{"an effect left in place", "z", "fork_compensated_exactly_once", func(_ *forkRun, l map[string][]chaos.Entry, _ map[string]*durable.ForkRecord) {
			l["f.fan.2.1"] = slices.DeleteFunc(l["f.fan.2.1"], func(e chaos.Entry) bool { return e.Phase == "undo" && e.Step == "p2" })
		}},
		{"an effect compensated twice", "z", "fork_compensated_exactly_once", func(_ *forkRun, l map[string][]chaos.Entry, _ map[string]*durable.ForkRecord) {
			e := l["f.sub.3.0"][len(l["f.sub.3.0"])-1]
			e.Key += "-again"
			l["f.sub.3.0"] = append(l["f.sub.3.0"], e)
		}},
		{"branches undone lowest index first", "z", "fork_undo_order", func(_ *forkRun, l map[string][]chaos.Entry, _ map[string]*durable.ForkRecord) {
			a, b := l["f.fan.2.0"], l["f.fan.2.1"]
			a[1].Seq, b[2].Seq = b[2].Seq, a[1].Seq
		}},
		{"a failure at another step", "z", "fork_status_as_scripted", func(r *forkRun, _ map[string][]chaos.Entry, _ map[string]*durable.ForkRecord) {
			r.final.Failure.Step = "c1"
		}},
	}
	for _, c := range cases {
		r, l, recs := forkWorld(c.fail)
		c.spoil(r, l, recs)
		if v := runForkCheck(r, l, recs); v[c.want] == 0 {
			t.Errorf("%s: violations %v, want %s", c.name, v, c.want)
		}
	}
}

// The step a script hangs is checked by its ledger entry: attempt 1
// applied and the step called again; or, attempt 1 cut off before its
// effect (a slow machine), recorded as a Timeout and retried.
func TestHangRecordedChecksTheHungAttempt(t *testing.T) {
	timeout := func(compensation bool, errType string) []saga.HistoryEntry {
		return []saga.HistoryEntry{{Attempt: 1, Outcome: saga.OutcomeRetrying, Compensation: compensation, Error: &saga.StepError{Type: errType}}}
	}
	applied, cutOff := chaos.Entry{Calls: 1, Attempts: []int{1}}, chaos.Entry{Calls: 1, Attempts: []int{2}}
	for _, c := range []struct {
		name    string
		e       chaos.Entry
		history []saga.HistoryEntry
		known   bool
		cut, ok bool
	}{
		{"applied, then called again", chaos.Entry{Calls: 2, Attempts: []int{1, 2}}, nil, true, false, true},
		{"applied, never called again", applied, timeout(false, lang.ErrorTypeTimeout), true, false, false},
		{"cut off before its effect, recorded", cutOff, timeout(false, lang.ErrorTypeTimeout), true, true, true},
		{"cut off before its effect, unrecorded", cutOff, nil, true, true, false},
		{"cut off, a compensation's attempt timed out", cutOff, timeout(true, lang.ErrorTypeTimeout), true, true, false},
		{"cut off, attempt 1 failed otherwise", cutOff, timeout(false, "Unavailable"), true, true, false},
		{"cut off, the history dropped entries", cutOff, nil, false, true, true},
	} {
		if cut, ok := hangRecordedIn(c.e, c.history, c.known); cut != c.cut || ok != c.ok {
			t.Errorf("%s: cut %v ok %v, want cut %v ok %v", c.name, cut, ok, c.cut, c.ok)
		}
	}
}

// A fork saga left waiting is excused only when each child that has not
// ended is the cancel's slow case: cancelled on its first version, its
// first attempt kept for the fallback 15 minutes on, nothing applied.
func TestWaitsOnCancelFallbacksOnlyForThatCase(t *testing.T) {
	fallback := func() *saga.State {
		return &saga.State{SagaID: "f.fan.2.1", Status: durable.StatusRunning, Version: 2, CancelRequested: true,
			Cursors: []saga.Cursor{{Step: 7, Attempt: 1}},
			Outbox:  []durable.Message{{SagaID: "f.fan.2.1", Version: 2, Queue: durable.QueueAdvance, Step: "p2", Attempt: 1, Delay: durable.MaxDelay}}}
	}
	ended := &saga.State{SagaID: "f.fan.2.0", Status: durable.StatusSucceeded, Version: 2}
	for _, c := range []struct {
		name   string
		spoil  func(*saga.State)
		effect bool
		want   bool
	}{
		{"the slow case", func(*saga.State) {}, false, true},
		{"its first attempt applied", func(*saga.State) {}, true, false},
		{"no cancel requested", func(st *saga.State) { st.CancelRequested = false }, false, false},
		{"past its first version", func(st *saga.State) { st.Version, st.Outbox[0].Version = 3, 3 }, false, false},
		{"a copy due at once", func(st *saga.State) { st.Outbox[0].Delay = 0 }, false, false},
		{"no outbox", func(st *saga.State) { st.Outbox = nil }, false, false},
		{"a later attempt", func(st *saga.State) { st.Cursors[0].Attempt, st.Outbox[0].Attempt = 2, 2 }, false, false},
		{"compensating", func(st *saga.State) { st.Status = durable.StatusCompensating }, false, false},
	} {
		ch := fallback()
		c.spoil(ch)
		ledger := map[string][]chaos.Entry{}
		if c.effect {
			ledger[ch.SagaID] = []chaos.Entry{{Saga: ch.SagaID, Step: "p2", Phase: "do", Calls: 1, Attempts: []int{1}}}
		}
		if got := waitsOnCancelFallbacks(map[string]*saga.State{"fan.2.0": ended, "fan.2.1": ch}, ledger); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if waitsOnCancelFallbacks(map[string]*saga.State{"fan.2.0": ended}, nil) {
		t.Error("every child ended: a parent left waiting is not excused")
	}
	other := &saga.State{SagaID: "f.sub.3.0", Status: durable.StatusRunning, Version: 5}
	if waitsOnCancelFallbacks(map[string]*saga.State{"fan.2.1": fallback(), "sub.3.0": other}, nil) {
		t.Error("beside a child that waits on its fallback, one stuck otherwise: excused")
	}
}
