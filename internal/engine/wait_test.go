package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A wait longer than a queue's delay sends no message: the saga waits,
// indexed by its timer, and the tick sends its message when it comes
// near, delayed to the second; a short wait is its own delayed message.
// One message per wait, however long.
func TestWaitsFireThroughTheTickAndTheirMessage(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/cooling.yaml")
	ctx := context.Background()
	r.start("c-1", nil)
	r.drain() // reserve runs; the saga waits 36 hours
	st := r.get("c-1")
	if st.Status != durable.StatusWaiting || r.q.Len(durable.QueueAdvance) != 0 {
		t.Fatalf("after reserve: %s, %d messages queued; want waiting with none", st.Status, r.q.Len(durable.QueueAdvance))
	}
	due := st.WakeAt()
	sent := r.queue.sent.Load()
	// Ticks before it comes near send nothing.
	for _, at := range []time.Duration{time.Hour, 35 * time.Hour} {
		r.clock.Advance((t0.Add(at)).Sub(r.clock.Now()))
		if res, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil || res.Due != 0 || res.Sent != 0 {
			t.Fatalf("tick at +%s: %+v %v", at, res, err)
		}
	}
	// Within a minute of it: one message, delayed to the due time.
	r.clock.Advance((due.Add(-40 * time.Second)).Sub(r.clock.Now()))
	if res, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil || res.Due != 1 || res.Sent != 1 {
		t.Fatalf("tick near the timer: %+v %v", res, err)
	}
	r.drain() // the timer fires at its due time; settle waits 90 s on its own message; ship runs
	st = r.get("c-1")
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("after the waits: %s (%+v)", st.Status, st.Failure)
	}
	if r.clock.Now().Before(due.Add(90 * time.Second)) {
		t.Fatalf("finished at %s, before the waits were over (%s + 90s)", r.clock.Now(), due)
	}
	// The 36-hour wait cost the tick's one message, the 90-second one its
	// own message; then ship's.
	if n := r.queue.sent.Load() - sent; n != 3 {
		t.Fatalf("%d messages sent after reserve, want 3: the tick's, settle's timer, ship's action", n)
	}
}

// Ticks of two processes before a timer fires send it twice: the copy is
// handled by the protocol's rules (it finds the next version, re-sends its
// outbox), and the saga ends as with one.
func TestATimerSentTwiceFiresOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/cooling.yaml")
	ctx := context.Background()
	r.start("c-1", nil)
	r.drain()
	r.clock.Advance(r.get("c-1").WakeAt().Add(-50 * time.Second).Sub(r.clock.Now()))
	if res, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil || res.Sent != 1 {
		t.Fatalf("tick: %+v %v", res, err)
	}
	// The same process ticking again sends nothing more; another process
	// (another Lambda instance) sends a copy.
	if res, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil || res.Sent != 0 {
		t.Fatalf("second tick of the same process: %+v %v", res, err)
	}
	other, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: r.store, Queue: r.queue, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := other.Tick(ctx, &engine.TickParams{}); err != nil || res.Sent != 1 {
		t.Fatalf("another process's tick: %+v %v", res, err)
	}
	r.drain()
	st := r.get("c-1")
	if st.Status != durable.StatusSucceeded || st.Version != 5 {
		t.Fatalf("%s v%d; want succeeded at v5 (start, reserve, cool_off's timer, settle's, ship): one write per transition", st.Status, st.Version)
	}
}

// A cancel compensates a waiting saga at once; its timer's message, if
// one comes, is dropped.
func TestCancelAWaitingSaga(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/cooling.yaml")
	ctx := context.Background()
	r.start("c-1", nil)
	r.drain()
	r.clock.Advance((r.get("c-1").WakeAt().Add(-30 * time.Second)).Sub(r.clock.Now()))
	if _, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.coord.Cancel(ctx, "c-1"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	st := r.get("c-1")
	if st.Status != durable.StatusCompensated || !st.WakeAt().IsZero() {
		t.Fatalf("after the cancel: %s, wake %s", st.Status, st.WakeAt())
	}
	undone := false
	r.mu.Lock()
	for _, ev := range r.events {
		undone = undone || (ev.Step == "reserve" && ev.Compensation && ev.Outcome == saga.OutcomeCompensated)
	}
	r.mu.Unlock()
	if !undone {
		t.Fatal("reserve was not compensated")
	}
}

// A timer's message that comes early (a clock behind, a copy sent ahead)
// is sent again for the time left, with no write.
func TestAnEarlyTimerMessageIsSentAgain(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/cooling.yaml")
	ctx := context.Background()
	r.start("c-1", nil)
	r.drain()
	st := r.get("c-1")
	r.clock.Advance((st.WakeAt().Add(-10 * time.Minute)).Sub(r.clock.Now()))
	// A tick whose clock runs 10 minutes ahead of this worker's.
	body := durable.AppendMessage(nil, durable.Message{SagaID: "c-1", Version: st.Version, Queue: durable.QueueAdvance, Step: "cool_off", Attempt: 1})
	out, err := r.coord.Handle(ctx, body)
	if err != nil || out != engine.HandledEarly {
		t.Fatalf("early: %s %v", out, err)
	}
	if got := r.get("c-1"); got.Version != st.Version || r.q.Len(durable.QueueAdvance) != 1 {
		t.Fatalf("version %d (was %d), %d queued: want no write and one message", got.Version, st.Version, r.q.Len(durable.QueueAdvance))
	}
	r.clock.Advance(10 * time.Minute)
	r.drain()
	if got := r.get("c-1"); got.Status != durable.StatusSucceeded {
		t.Fatalf("after the time left: %s", got.Status)
	}
}
