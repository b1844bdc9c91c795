package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// exercisePauses holds a store that keeps pauses (durable.Pauses) to its
// contract; a store without them skips it.
func exercisePauses(t *testing.T, newStore NewStore) {
	t.Run("PausePutListDelete", func(t *testing.T) { testPauses(t, newStore(t)) })
	t.Run("PauseRefusesBadTargets", func(t *testing.T) { testPauseChecks(t, newStore(t)) })
}

func pausesOf(t *testing.T, s durable.Store) durable.Pauses {
	t.Helper()
	ps, ok := s.(durable.Pauses)
	if !ok {
		t.Skip("the store keeps no pauses (durable.Pauses)")
	}
	return ps
}

func listPauses(t *testing.T, ps durable.Pauses) []durable.Pause {
	t.Helper()
	got, err := ps.PauseList(context.Background(), &durable.PauseListParams{Consistent: true})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func samePauses(t *testing.T, got, want []durable.Pause) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("pauses:\n got %+v\nwant %+v", got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Kind != w.Kind || g.Target != w.Target || !g.Until.Equal(w.Until) || g.Compensations != w.Compensations || !g.CreatedAt.Equal(w.CreatedAt) {
			t.Fatalf("pause %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func testPauses(t *testing.T, s durable.Store) {
	ps := pausesOf(t, s)
	ctx := context.Background()
	samePauses(t, listPauses(t, ps), nil)
	byName := durable.Pause{Kind: durable.PauseName, Target: "order", CreatedAt: base}
	byAction := durable.Pause{Kind: durable.PauseAction, Target: "charge", Until: base.Add(2 * time.Hour), Compensations: true, CreatedAt: base.Add(time.Second)}
	expired := durable.Pause{Kind: durable.PauseAction, Target: "audit", Until: base.Add(-time.Hour), CreatedAt: base.Add(-2 * time.Hour)}
	for _, p := range []durable.Pause{byName, byAction, expired} {
		if err := ps.PausePut(ctx, &durable.PausePutParams{Pause: p}); err != nil {
			t.Fatalf("put %s %s: %v", p.Kind, p.Target, err)
		}
	}
	// Sorted by kind, then target; expired ones listed too.
	samePauses(t, listPauses(t, ps), []durable.Pause{expired, byAction, byName})
	if expired.Active(base) || !byAction.Active(base) || byAction.Active(byAction.Until) || !byName.Active(base.Add(1000*time.Hour)) {
		t.Fatal("Pause.Active judges Until wrongly")
	}
	// A put of the same kind and target replaces it.
	byName2 := byName
	byName2.Until, byName2.Compensations, byName2.CreatedAt = base.Add(time.Hour), true, base.Add(time.Minute)
	if err := ps.PausePut(ctx, &durable.PausePutParams{Pause: byName2}); err != nil {
		t.Fatal(err)
	}
	samePauses(t, listPauses(t, ps), []durable.Pause{expired, byAction, byName2})
	// The same target of the other kind is another pause.
	if err := ps.PauseDelete(ctx, &durable.PauseDeleteParams{Kind: durable.PauseAction, Target: "order"}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("delete of a pause never put: %v, want ErrNotFound", err)
	}
	for _, p := range []durable.Pause{byName2, expired} {
		if err := ps.PauseDelete(ctx, &durable.PauseDeleteParams{Kind: p.Kind, Target: p.Target}); err != nil {
			t.Fatalf("delete %s %s: %v", p.Kind, p.Target, err)
		}
	}
	if err := ps.PauseDelete(ctx, &durable.PauseDeleteParams{Kind: durable.PauseName, Target: "order"}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	samePauses(t, listPauses(t, ps), []durable.Pause{byAction})
	// Pauses are not sagas: no listing shows them.
	if got := listAll(t, s, durable.SagaListParams{}); len(got) != 0 {
		t.Fatalf("a listing of sagas shows %v", ids(got))
	}
}

func testPauseChecks(t *testing.T, s durable.Store) {
	ps := pausesOf(t, s)
	ctx := context.Background()
	long := string(make([]byte, durable.MaxPauseTargetBytes+1))
	for _, p := range []durable.Pause{
		{Kind: "saga", Target: "order"},
		{Kind: durable.PauseName, Target: ""},
		{Kind: durable.PauseAction, Target: long},
	} {
		if err := ps.PausePut(ctx, &durable.PausePutParams{Pause: p}); err == nil {
			t.Errorf("put of kind %q target of %d bytes: no error", p.Kind, len(p.Target))
		}
		if err := ps.PauseDelete(ctx, &durable.PauseDeleteParams{Kind: p.Kind, Target: p.Target}); err == nil || errors.Is(err, durable.ErrNotFound) {
			t.Errorf("delete of kind %q target of %d bytes: %v, want a range error", p.Kind, len(p.Target), err)
		}
	}
	samePauses(t, listPauses(t, ps), nil)
}
