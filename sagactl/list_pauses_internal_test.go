package sagactl

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// pausesRead counts the reads of the pauses item.
type pausesRead struct {
	pauses []durable.Pause
	reads  int
}

func (p *pausesRead) Pauses(context.Context) ([]durable.Pause, error) {
	p.reads++
	return p.pauses, nil
}

// A listing marks a saga as the functions would hold it: a pause of its
// name, active now, holds a running, waiting or held (its retry) saga, a
// compensating one only when it holds compensations, never a final one.
func TestListMarksWhatAPauseOfTheNameHolds(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	pl := &pausesRead{pauses: []durable.Pause{
		{Kind: durable.PauseName, Target: "order"},
		{Kind: durable.PauseName, Target: "refund", Compensations: true, Until: now.Add(time.Hour)},
		{Kind: durable.PauseName, Target: "ship", Until: now.Add(-time.Second)},
		{Kind: durable.PauseAction, Target: "card.charge", Until: now.Add(time.Minute)},
		{Kind: durable.PauseAction, Target: "old.action", Until: now},
		{Kind: durable.PauseAction, Target: "audit.write"},
	}}
	sagas := []durable.SagaSummary{
		{SagaID: "o-run", Name: "order", Status: durable.StatusRunning},
		{SagaID: "o-wait", Name: "order", Status: durable.StatusWaiting},
		{SagaID: "o-comp", Name: "order", Status: durable.StatusCompensating},
		{SagaID: "o-held", Name: "order", Status: durable.StatusHeld},
		{SagaID: "o-done", Name: "order", Status: durable.StatusSucceeded},
		{SagaID: "r-comp", Name: "refund", Status: durable.StatusCompensating},
		{SagaID: "s-run", Name: "ship", Status: durable.StatusRunning},
		{SagaID: "x-run", Name: "other", Status: durable.StatusRunning},
	}
	lp, err := listPausesOf(context.Background(), pl.Pauses, sagas, now)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"o-run": "order", "o-wait": "order", "o-held": "order", "r-comp": "refund"}
	for _, s := range sagas {
		got := lp.holds(s)
		switch {
		case want[s.SagaID] == "" && got != nil:
			t.Errorf("%s (%s): marked paused by %+v, want not", s.SagaID, s.Status, got)
		case want[s.SagaID] != "" && (got == nil || got.Target != want[s.SagaID]):
			t.Errorf("%s (%s): paused by %+v, want name %s", s.SagaID, s.Status, got, want[s.SagaID])
		}
	}
	if len(lp.actions) != 2 || lp.actions[0].Target != "audit.write" || lp.actions[0].Until != nil ||
		lp.actions[1].Target != "card.charge" || lp.actions[1].Until == nil || !lp.actions[1].Until.Equal(now.Add(time.Minute)) {
		t.Errorf("paused actions: %+v, want audit.write then card.charge, by name (old.action ended at now)", lp.actions)
	}
	if pl.reads != 1 {
		t.Errorf("%d reads of the pauses, want 1", pl.reads)
	}
}

// A listing of sagas no pause can hold reads no pauses.
func TestListOfEndedSagasReadsNoPauses(t *testing.T) {
	pl := &pausesRead{}
	sagas := []durable.SagaSummary{{SagaID: "a", Status: durable.StatusSucceeded}, {SagaID: "b", Status: durable.StatusCompensated}, {SagaID: "c", Status: durable.StatusCompensationFailed}}
	for _, ss := range [][]durable.SagaSummary{nil, sagas} {
		if _, err := listPausesOf(context.Background(), pl.Pauses, ss, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if pl.reads != 0 {
		t.Errorf("%d reads of the pauses for %d ended sagas, want 0", pl.reads, len(sagas))
	}
}

// A pauses read that fails fails the listing, naming what it read.
func TestListSaysWhenThePausesCannotBeRead(t *testing.T) {
	_, err := listPausesOf(context.Background(), failingPauses{}.Pauses, []durable.SagaSummary{{Status: durable.StatusRunning}}, time.Now())
	if err == nil || err.Error() != "reading the pauses: throttled" {
		t.Fatalf("err %v, want it to name the pauses", err)
	}
}

type failingPauses struct{}

func (failingPauses) Pauses(context.Context) ([]durable.Pause, error) {
	return nil, errors.New("throttled")
}
