package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// A saga whose first write landed and whose first message was never sent
// (its starter died between the two), then cancelled: the cancel keeps the
// first attempt pending, as it must for an attempt that may be running, but
// on a saga's first version it also sends that attempt's message again at
// once, rather than only the fallback 15 minutes off. The saga runs the
// attempt and compensates within the minute.
func TestCancelOnTheFirstVersionRunsTheFirstAttemptAtOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/expense.yaml")
	ctx := context.Background()
	startUnsent(t, r, "e-1")
	if _, err := r.coord.Cancel(ctx, "e-1"); err != nil {
		t.Fatal(err)
	}
	r.drain() // delays of up to 100 s: not the fallback's
	st := r.get("e-1")
	if st.Status != durable.StatusCompensated || callsOf(r, "e-1/file/1") != 1 || callsOf(r, "e-1/file.compensate/1") != 1 {
		t.Fatalf("after the cancel: %s at v%d, file ran %d times, compensated %d times; want compensated, each once, without waiting for the fallback",
			st.Status, st.Version, callsOf(r, "e-1/file/1"), callsOf(r, "e-1/file.compensate/1"))
	}
	// The fallback, when it comes, finds the saga ended.
	r.clock.Advance(durable.MaxDelay)
	r.drain()
	if callsOf(r, "e-1/file/1") != 1 {
		t.Fatalf("the fallback ran file again: %d calls", callsOf(r, "e-1/file/1"))
	}
}

// startUnsent starts an expense saga whose first message is never sent:
// its write lands, the send fails (its starter died between the two).
func startUnsent(t *testing.T, r *rig, id string) {
	t.Helper()
	r.queue.failSends.Store(1)
	if _, err := r.coord.Start(context.Background(), &engine.StartParams{Plan: r.plan, SagaID: id, Input: map[string]any{"amount": 1}}); err == nil {
		t.Fatal("setup: the lost send was not reported")
	}
	if st := r.get(id); st.Version != 1 {
		t.Fatalf("setup: saga at version %d, want its first", st.Version)
	}
}

// A cancel repeated after the first one's send failed sends the first
// attempt again too: the repeat is how a caller finishes a cancel.
func TestRepeatedCancelOnTheFirstVersionSendsTheFirstAttempt(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/expense.yaml")
	ctx := context.Background()
	startUnsent(t, r, "e-2")
	r.queue.failSends.Store(1)
	if _, err := r.coord.Cancel(ctx, "e-2"); err == nil {
		t.Fatal("setup: the cancel's failed send was not reported")
	}
	if _, err := r.coord.Cancel(ctx, "e-2"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("e-2"); st.Status != durable.StatusCompensated || callsOf(r, "e-2/file/1") != 1 {
		t.Fatalf("after the repeated cancel: %s, file ran %d times; want compensated, file once", st.Status, callsOf(r, "e-2/file/1"))
	}
}

// A fork's child created and never sent (its launcher died between the
// create and the send), then stopped by its parent's cancel: the kill test
// met it. The child runs its first attempt at once and compensates, and the
// parent ends within minutes, not at the child's fallback 15 minutes on.
func TestChildCancelledBeforeItsFirstSendEndsWithoutTheFallback(t *testing.T) {
	t.Parallel()
	r := newForkRig(t, twoBranchYAML, nil)
	ctx := context.Background()
	flight := durable.ChildID("p", "book", 1, 1)
	lost := false
	var sent []durable.Message
	r.queue.setHook(func(m durable.Message) (bool, error) {
		sent = append(sent, m)
		if m.SagaID == flight && m.Kind == durable.KindStep && !lost {
			lost = true
			return false, errors.New("the launcher died before the send")
		}
		return false, nil
	})
	if _, err := r.coord.Start(ctx, &engine.StartParams{Plan: r.plan, SagaID: "p"}); err == nil {
		t.Fatal("setup: the lost launch send was not reported")
	}
	if st := r.get(flight); st.Version != 1 {
		t.Fatalf("setup: child at version %d, want its first", st.Version)
	}
	if _, err := r.coord.Cancel(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	// The parent's cancel stops its fork; it sends no step of its own
	// for the fork it waits on.
	if i := slices.IndexFunc(sent, func(m durable.Message) bool { return m.SagaID == "p" && m.Kind == durable.KindStep }); i >= 0 {
		t.Errorf("the parent's cancel sent a step message for its fork: %+v", sent[i])
	}
	r.drain() // to the child's fallback, stale when it comes
	st := r.get("p")
	if took := st.UpdatedAt.Sub(t0); st.Status != durable.StatusCompensated || took >= 5*time.Minute {
		t.Fatalf("parent %s, its last write %s after the start; want compensated, well before the child's fallback (%s)", st.Status, took, durable.MaxDelay)
	}
	if effects := r.effects(); slices.Contains(effects, "flights.book(flight)") != slices.Contains(effects, "flights.cancel(flight)") {
		t.Fatalf("effects %v: the flight booked and not cancelled, or cancelled unbooked", effects)
	}
}
