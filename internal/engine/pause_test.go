package engine_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

const pauseSaga = `
saga: order
steps:
  - {id: reserve, action: inventory.reserve, compensate: {action: inventory.release}}
  - {id: charge, action: payments.charge, compensate: {action: payments.refund}}
  - {id: ship, action: shipping.send}
`

// pausing is the rig's store with the memory store's pauses, which the
// rig's wrapper does not pass on; lists counts the reads of them.
type pausing struct {
	*rigStore
	ps    durable.Pauses
	lists atomic.Int64
}

func (s *pausing) PausePut(ctx context.Context, p *durable.PausePutParams) error {
	return s.ps.PausePut(ctx, p)
}

func (s *pausing) PauseDelete(ctx context.Context, p *durable.PauseDeleteParams) error {
	return s.ps.PauseDelete(ctx, p)
}

func (s *pausing) PauseList(ctx context.Context, p *durable.PauseListParams) ([]durable.Pause, error) {
	s.lists.Add(1)
	return s.ps.PauseList(ctx, p)
}

// newPauseRig is a hand rig running src on a store that keeps pauses;
// chainSteps as CoordinatorConfig.ChainSteps (the hand rig's -1: none).
func newPauseRig(t *testing.T, src string, chainSteps int) (*rig, *pausing) {
	t.Helper()
	r := newBareRig(t, byHand, nil)
	r.actions = &handActions{}
	r.plan = mustCompile(t, src)
	r.connect(engine.CoordinatorConfig{Actions: r.actions, ChainSteps: chainSteps})
	ps := &pausing{rigStore: r.store, ps: r.store.Store.(durable.Pauses)}
	cfg := r.cfg
	cfg.Store = ps
	c, err := engine.NewCoordinator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.coord, r.cfg = c, cfg
	return r, ps
}

// next takes the first queued message of step and hands it to the
// coordinator, returning what it did.
func (r *rig) next(step string) (durable.Message, engine.Outcome) {
	r.t.Helper()
	return r.nextIn("", step)
}

// nextIn is next for the messages of one queue (any queue when empty).
func (r *rig) nextIn(queue durable.QueueName, step string) (durable.Message, engine.Outcome) {
	r.t.Helper()
	for i, m := range r.hand.msgs {
		if m.Step != step || queue != "" && m.Queue != queue {
			continue
		}
		r.hand.msgs = append(r.hand.msgs[:i:i], r.hand.msgs[i+1:]...)
		out, err := r.coord.Handle(context.Background(), durable.AppendMessage(nil, m))
		if err != nil {
			r.t.Fatalf("handle %s: %v", step, err)
		}
		return m, out
	}
	r.t.Fatalf("no message for %s among %v", step, r.hand.msgs)
	return durable.Message{}, ""
}

func (r *rig) pause(kind durable.PauseKind, target string, until time.Time, comps bool) {
	r.t.Helper()
	if err := r.coord.Pause(context.Background(), &engine.PauseParams{Kind: kind, Target: target, Until: until, Compensations: comps}); err != nil {
		r.t.Fatal(err)
	}
}

// A paused action's message goes out again with a delay, nothing is
// written and no attempt is spent; after the unpause the same attempt
// runs and the saga ends.
func TestPausedActionIsDeferredWithoutSpendingAttempts(t *testing.T) {
	t.Parallel()
	for _, kind := range durable.PauseKinds() {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			r, _ := newPauseRig(t, pauseSaga, 0)
			target := "payments.charge"
			if kind == durable.PauseName {
				target = "order"
			}
			var attempts []saga.Call
			r.actions.fail = func(c saga.Call) bool { attempts = append(attempts, c); return false }
			r.pause(kind, target, time.Time{}, false)
			r.start("s-1", nil)
			if kind == durable.PauseAction {
				r.next("reserve")
			}
			before := r.get("s-1")
			step := before.Outbox[0].Step
			for range 3 {
				m, out := r.next(step)
				if out != engine.HandledPaused {
					t.Fatalf("paused %s: outcome %s", step, out)
				}
				again := r.hand.msgs[len(r.hand.msgs)-1]
				if again.Version != m.Version || again.Attempt != m.Attempt || again.Step != m.Step || again.Delay != engine.PausePoll {
					t.Fatalf("deferred as %+v, want %+v again with a delay of %s", again, m, engine.PausePoll)
				}
				r.clock.Advance(engine.PausePoll)
			}
			if got := r.get("s-1"); got.Version != before.Version || len(r.actions.called("s-1/"+step)) != 0 {
				t.Fatalf("while paused: version %d (was %d), calls %v", got.Version, before.Version, r.actions.calls)
			}
			if err := r.coord.Unpause(context.Background(), kind, target); err != nil {
				t.Fatal(err)
			}
			r.drain()
			r.endsAs(t, "s-1", durable.StatusSucceeded, "")
			if got := r.get("s-1"); !strings.Contains(strings.Join(r.actions.calls, " "), "s-1/ship") {
				t.Fatalf("after the unpause: %s, calls %v", got.Status, r.actions.calls)
			}
			for _, c := range attempts {
				if c.Attempt != 1 {
					t.Errorf("%s called at attempt %d: a deferral spent an attempt", c.Step, c.Attempt)
				}
			}
		})
	}
}

// A chain stops before a paused step and sends its message, which then
// defers.
func TestChainStopsBeforeAPausedStep(t *testing.T) {
	t.Parallel()
	r, _ := newPauseRig(t, pauseSaga, engine.DefaultChainSteps)
	r.pause(durable.PauseAction, "payments.charge", time.Time{}, false)
	r.start("s-1", nil)
	if _, out := r.next("reserve"); out != engine.HandledStep {
		t.Fatalf("reserve: %s", out)
	}
	if len(r.hand.msgs) != 1 || r.hand.msgs[0].Step != "charge" || r.get("s-1").Version != 2 {
		t.Fatalf("after reserve: queued %v at version %d, want charge's message at 2", r.hand.msgs, r.get("s-1").Version)
	}
	if _, out := r.next("charge"); out != engine.HandledPaused {
		t.Fatalf("charge: %s", out)
	}
}

// A cancel of a saga whose attempt is paused does not wait for that
// attempt: the deferred message writes its outcome as unknown (a
// delivery before the pause may have run it), and the saga compensates.
// Finding that outcome out calls the paused action, so it waits for the
// unpause; then the saga compensates everything, in reverse.
func TestCancelCarriesThroughAPausedAttempt(t *testing.T) {
	t.Parallel()
	r, _ := newPauseRig(t, pauseSaga, 0)
	r.pause(durable.PauseAction, "payments.charge", time.Time{}, false)
	r.start("s-1", nil)
	r.next("reserve")
	r.next("charge")
	if _, err := r.coord.Cancel(context.Background(), "s-1"); err != nil {
		t.Fatal(err)
	}
	if _, out := r.next("charge"); out != engine.HandledStep {
		t.Fatalf("the deferred message after the cancel: %s, want the attempt's outcome written", out)
	}
	if st := r.get("s-1"); st.Status != durable.StatusCompensating || st.Failure == nil || st.Failure.Type != lang.ErrorTypeCancelled {
		t.Fatalf("after the cancel: %s (failure %+v), want compensating, cancelled", st.Status, st.Failure)
	}
	if _, out := r.nextIn(durable.QueueCompensate, "charge"); out != engine.HandledPaused {
		t.Fatalf("finding out charge while paused: %s, want it held", out)
	}
	if got := strings.Join(r.actions.calls, " "); got != "s-1/reserve" {
		t.Fatalf("calls while paused: %s, want reserve only", got)
	}
	if err := r.coord.Unpause(context.Background(), durable.PauseAction, "payments.charge"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	r.endsAs(t, "s-1", durable.StatusCompensated, lang.ErrorTypeCancelled)
	if got := strings.Join(r.actions.calls, " "); got != "s-1/reserve s-1/charge s-1/charge.compensate s-1/reserve.compensate" {
		t.Fatalf("calls: %s, want charge found out, then everything undone in reverse", got)
	}
}

// The saga's deadline wins over a pause: a deferral comes back by the
// deadline, which then fires; the held attempt is found out (after the
// unpause, since it calls the paused action) and compensated.
func TestPausedStepMeetsItsDeadline(t *testing.T) {
	t.Parallel()
	r, _ := newPauseRig(t, strings.Replace(pauseSaga, "saga: order\n", "saga: order\ntimeout: 90s\n", 1), 0)
	r.pause(durable.PauseAction, "payments.charge", time.Time{}, false)
	r.start("s-1", nil)
	r.next("reserve")
	r.next("charge")
	r.clock.Advance(engine.PausePoll)
	r.next("charge")
	again := r.hand.msgs[len(r.hand.msgs)-1]
	left := r.get("s-1").Deadline.Sub(r.clock.Now())
	if again.Delay > left+time.Second || again.Delay < left {
		t.Fatalf("deferred %s with %s to the deadline, want it back just after it", again.Delay, left)
	}
	r.clock.Advance(again.Delay)
	if _, out := r.next("charge"); out != engine.HandledTimer {
		t.Fatalf("past the deadline: %s, want the deadline fired", out)
	}
	if st := r.get("s-1"); st.Status != durable.StatusCompensating || st.Failure == nil || st.Failure.Type != lang.ErrorTypeDeadline {
		t.Fatalf("after the deadline: %s (failure %+v)", st.Status, st.Failure)
	}
	if len(r.actions.called("s-1/charge")) != 0 {
		t.Fatalf("charge ran while paused: %v", r.actions.calls)
	}
	if err := r.coord.Unpause(context.Background(), durable.PauseAction, "payments.charge"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	r.endsAs(t, "s-1", durable.StatusCompensated, lang.ErrorTypeDeadline)
	if got := strings.Join(r.actions.calls, " "); got != "s-1/reserve s-1/charge s-1/charge.compensate s-1/reserve.compensate" {
		t.Fatalf("calls: %s", got)
	}
}

// A step without a compensation that meets the saga's deadline while
// paused is never found out: a delivery before the pause may have run
// it (its write lost), so the history says so rather than that it did
// not run, and the call is not made again while paused.
func TestPausedUncompensatedStepMeetsItsDeadline(t *testing.T) {
	t.Parallel()
	r, _ := newPauseRig(t, strings.Replace(pauseSaga, "saga: order\n", "saga: order\ntimeout: 90s\n", 1), 0)
	r.start("s-1", nil)
	r.next("reserve")
	r.next("charge")
	// ship runs; its outcome's write is throttled; the message comes
	// back after the pause, and past the deadline.
	var shipMsg durable.Message
	for _, m := range r.hand.msgs {
		if m.Step == "ship" {
			shipMsg = m
		}
	}
	r.store.setHook(func(op, key string) error {
		if op == "update" {
			return durable.ErrThrottled
		}
		return nil
	})
	if _, err := r.coord.Handle(context.Background(), durable.AppendMessage(nil, shipMsg)); err == nil {
		t.Fatal("ship's delivery with its write throttled: no error")
	}
	r.store.setHook(nil)
	r.pause(durable.PauseAction, "shipping.send", time.Time{}, false)
	r.clock.Advance(2 * time.Minute)
	if _, out := r.next("ship"); out != engine.HandledTimer {
		t.Fatalf("past the deadline: %s, want the deadline fired", out)
	}
	r.drain()
	r.endsAs(t, "s-1", durable.StatusCompensated, lang.ErrorTypeDeadline)
	if got := r.actions.called("s-1/ship"); len(got) != 1 {
		t.Fatalf("ship called %v, want once: before the pause, never while paused", got)
	}
	entries, err := r.get("s-1").HistoryEntries(r.plan)
	if err != nil {
		t.Fatal(err)
	}
	var msg string
	for _, e := range entries {
		if e.Step == "ship" && e.Outcome == saga.OutcomeFailed && e.Error != nil {
			msg = e.Error.Message
		}
	}
	if !strings.Contains(msg, "paused") || !strings.Contains(msg, "may have run") {
		t.Fatalf("history of ship: %q, want it to say the attempt was paused and may have run before", msg)
	}
}

// A pause by name without compensations lets a cancelled saga's
// compensation, finding out included, run at once.
func TestNamePauseLetsCompensationsRun(t *testing.T) {
	t.Parallel()
	r, _ := newPauseRig(t, pauseSaga, 0)
	r.start("s-1", nil)
	r.next("reserve")
	r.pause(durable.PauseName, "order", time.Time{}, false)
	r.next("charge")
	if _, err := r.coord.Cancel(context.Background(), "s-1"); err != nil {
		t.Fatal(err)
	}
	r.drain()
	r.endsAs(t, "s-1", durable.StatusCompensated, lang.ErrorTypeCancelled)
}

// A pause with an end defers its steps until then, not a whole poll.
func TestPauseUntilEndsOnTime(t *testing.T) {
	t.Parallel()
	r, _ := newPauseRig(t, pauseSaga, 0)
	r.pause(durable.PauseAction, "payments.charge", r.clock.Now().Add(90*time.Second), false)
	r.start("s-1", nil)
	r.next("reserve")
	r.next("charge")
	r.clock.Advance(engine.PausePoll)
	r.next("charge")
	if d := r.hand.msgs[len(r.hand.msgs)-1].Delay; d != 30*time.Second {
		t.Fatalf("deferred for %s, want the 30s left of the pause", d)
	}
	r.clock.Advance(30 * time.Second)
	r.drain()
	r.endsAs(t, "s-1", durable.StatusSucceeded, "")
}

// A pause whose --until has passed, or is now, would hold nothing: it is
// refused, and nothing is stored.
func TestPauseUntilInThePastIsRefused(t *testing.T) {
	t.Parallel()
	r, _ := newPauseRig(t, pauseSaga, 0)
	ctx := context.Background()
	for _, until := range []time.Time{r.clock.Now().Add(-time.Hour), r.clock.Now()} {
		err := r.coord.Pause(ctx, &engine.PauseParams{Kind: durable.PauseAction, Target: "payments.charge", Until: until})
		if err == nil || !strings.Contains(err.Error(), "has passed") {
			t.Fatalf("until %s: %v", until, err)
		}
	}
	if ps, err := r.coord.Pauses(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("pauses after the refusals: %v %v", ps, err)
	}
}

// Compensations run through a pause unless it says otherwise.
func TestPauseHoldsCompensationsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	for _, comps := range []bool{false, true} {
		r, _ := newPauseRig(t, pauseSaga, 0)
		r.actions.fail = func(c saga.Call) bool { return c.Step == "ship" }
		r.pause(durable.PauseAction, "inventory.release", time.Time{}, comps)
		r.start("s-1", nil)
		r.drain()
		st := r.get("s-1")
		released := len(r.actions.called("s-1/reserve.compensate"))
		switch {
		case !comps && (st.Status != durable.StatusCompensated || released != 1):
			t.Errorf("a pause without compensations: %s, release called %d times; want it compensated", st.Status, released)
		case comps && (st.Status != durable.StatusCompensating || released != 0):
			t.Errorf("a pause with compensations: %s, release called %d times; want it held", st.Status, released)
		}
	}
}

// The sweep leaves a paused saga alone: its message comes back by itself.
func TestSweepLeavesPausedSagasAlone(t *testing.T) {
	t.Parallel()
	r, _ := newPauseRig(t, pauseSaga, 0)
	r.pause(durable.PauseAction, "payments.charge", time.Time{}, false)
	r.start("s-1", nil)
	r.next("reserve")
	r.clock.Advance(time.Hour)
	res, err := r.coord.Sweep(context.Background(), &engine.SweepParams{IdleFor: 20 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resent != 0 || res.Paused != 1 || res.LeftForOperator != 0 {
		t.Fatalf("sweep: %+v, want the paused saga counted as paused, nothing sent", *res)
	}
}

// Each process reads the pauses at most once per PauseTTL, however many
// steps it runs; a pause made elsewhere holds within it.
func TestPausesAreReadOncePerTTL(t *testing.T) {
	t.Parallel()
	r, ps := newPauseRig(t, pauseSaga, 0)
	for i := range 20 {
		r.start("s-"+string(rune('a'+i)), nil)
	}
	r.drain()
	if n := ps.lists.Load(); n != 1 {
		t.Fatalf("%d reads of the pauses for 60 steps within %s, want 1", n, engine.PauseTTL)
	}
	// Another process pauses: seen once the TTL has passed.
	if err := ps.PausePut(context.Background(), &durable.PausePutParams{Pause: durable.Pause{Kind: durable.PauseName, Target: "order"}}); err != nil {
		t.Fatal(err)
	}
	r.start("s-late", nil)
	if _, out := r.next("reserve"); out != engine.HandledStep {
		t.Fatalf("within the TTL: %s, want the step run (the pause not seen yet)", out)
	}
	r.clock.Advance(engine.PauseTTL)
	if _, out := r.next("charge"); out != engine.HandledPaused {
		t.Fatalf("after the TTL: %s, want paused", out)
	}
	if n := ps.lists.Load(); n != 2 {
		t.Fatalf("%d reads, want 2", n)
	}
}

// endsAs checks that saga id ended in status, with a failure of failType
// (none when empty).
func (r *rig) endsAs(t *testing.T, id string, status durable.Status, failType string) {
	t.Helper()
	st := r.get(id)
	if st.Status != status || (failType == "") != (st.Failure == nil) || st.Failure != nil && st.Failure.Type != failType {
		t.Fatalf("status %s (failure %+v), want %s (failure %q)", st.Status, st.Failure, status, failType)
	}
}
