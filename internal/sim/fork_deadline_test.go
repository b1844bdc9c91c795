package sim

import (
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// deadline_kept over a fork saga whose deadline passes while its children
// run, the deadline's timer coming twenty minutes late (as under the
// backlog of 10,000 sagas on one virtual clock). The write that fires it
// records the failure and stops the fork, and must leave the saga waiting
// until its children have ended (docs/STATES.md): the deadline is kept. A
// write as late that leaves the fork running is not.
func TestDeadlineKeptWhenTheDeadlineStopsAFork(t *testing.T) {
	p, err := saga.Compile("late.yaml", []byte(`saga: late
timeout: 5m
steps:
  - id: first
    action: svc.first
    compensate: {action: svc.unfirst}
  - id: both
    parallel:
      - steps: [{id: left, action: svc.left}]
      - steps: [{id: right, action: svc.right}]
`), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	late := t0.Add(25 * time.Minute)
	st := &saga.State{}
	var writes []committedWrite
	advance := func(ev saga.Event) {
		t.Helper()
		if err := p.Advance(st, ev); err != nil {
			t.Fatal(err)
		}
		writes = append(writes, write(t, p, st, ev.Now))
	}
	advance(saga.Event{Kind: saga.EventStart, SagaID: "p", Now: t0})
	advance(saga.Event{Kind: saga.EventResult, Now: t0.Add(time.Second), Output: map[string]any{"id": 1}})
	forked := writes[1]
	if cur, ok := st.Pending(); !ok || !cur.Fork || st.Status != durable.StatusWaiting {
		t.Fatalf("after first: %s at %+v, want waiting on the fork", st.Status, cur)
	}
	fork, _ := st.Pending()
	advance(saga.Event{Kind: saga.EventTimer, Now: late})
	if st.Status != durable.StatusWaiting || st.Failure == nil {
		t.Fatalf("the deadline's timer leaves the saga %s (failure %v), want waiting on the stopped fork", st.Status, st.Failure)
	}
	stopped := &saga.StepError{Step: "both", Type: "Cancelled", Message: "the fork was stopped"}
	advance(saga.Event{Kind: saga.EventJoin, Now: late.Add(5 * time.Minute), Join: &saga.Join{Version: fork.Version, Failure: stopped}})
	advance(saga.Event{Kind: saga.EventResult, Now: late.Add(6 * time.Minute)})
	if st.Status != durable.StatusCompensated {
		t.Fatalf("the saga ends %s, want compensated", st.Status)
	}
	if v := deadlineViolations(p, st, writes, late.Add(time.Hour)); v != 0 {
		t.Errorf("deadline_kept broken %d times by a saga whose deadline stopped its fork", v)
	}

	// The same saga, had its late write left the fork running.
	ignored := forked
	ignored.version, ignored.at = 3, late
	ignoring := append([]committedWrite{writes[0], writes[1], ignored}, writes[3:]...)
	if v := deadlineViolations(p, st, ignoring, late.Add(time.Hour)); v != 1 {
		t.Errorf("deadline_kept broken %d times by a write past the deadline that left the fork running, want 1", v)
	}
}

// write is the committed write of st, taken by the store at at.
func write(t *testing.T, p *saga.Plan, st *saga.State, at time.Time) committedWrite {
	t.Helper()
	b, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	w := &world{}
	sum := w.summarize(&durable.SagaRecord{SagaID: st.SagaID, Version: st.Version, State: b}, p)
	if sum == nil {
		t.Fatal("state does not decode")
	}
	return committedWrite{id: st.SagaID, version: st.Version, status: st.Status, at: at, log: &handleLog{}, sum: sum}
}

// deadlineViolations runs the delivery checks over writes at the end of
// a run at end, and counts deadline_kept's violations.
func deadlineViolations(p *saga.Plan, st *saga.State, writes []committedWrite, end time.Time) int {
	w := &world{
		report: &Report{Checks: map[string]int{}, Violations: map[string]int{}},
		clock:  durable.NewManualClock(end),
	}
	w.checkDeliveries(&sagaSpec{id: st.SagaID, plan: p}, st, writes)
	return w.report.Violations["deadline_kept"]
}
