package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func callsOf(r *rig, key string) int64 {
	n, ok := r.calls.Load(key)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// A signal that comes while the action before its await runs is kept
// beside the version: the action's write loses its condition, its outcome
// is applied to the saga as it is now (the action does not run again), and
// the await takes the signal without pausing.
func TestSignalWhileTheActionBeforeItsAwaitRuns(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/expense.yaml")
	ctx := context.Background()
	var kept *engine.Delivered
	r.reg.Register("expenses.file", func(ctx context.Context, c saga.Call) (any, error) {
		n, _ := r.calls.LoadOrStore(c.IdempotencyKey, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		var err error
		kept, err = r.coord.Signal(ctx, &engine.SignalParams{SagaID: c.SagaID, Name: "approved", Payload: json.RawMessage(`{"by":"ann"}`), ID: "mail-1"})
		if err != nil {
			t.Errorf("signal: %v", err)
		}
		return map[string]any{"id": "claim-1"}, nil
	})
	r.start("e-1", map[string]any{"amount": 12})
	r.drain()
	st := r.get("e-1")
	if kept == nil || kept.Receipt != saga.ReceiptKept {
		t.Fatalf("the early signal: %+v", kept)
	}
	if st.Status != durable.StatusSucceeded || callsOf(r, "e-1/file/1") != 1 {
		t.Fatalf("saga %s (%+v), file ran %d times", st.Status, st.Failure, callsOf(r, "e-1/file/1"))
	}
	if by := st.Vars["decision"].(map[string]any)["by"]; by != "ann" {
		t.Fatalf("decision %v", st.Vars["decision"])
	}
	// The sender retries with the same id: nothing more happens.
	again, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "e-1", Name: "approved", Payload: map[string]any{"by": "bob"}, ID: "mail-1"})
	if err != nil || again.Receipt != saga.ReceiptDuplicate {
		t.Fatalf("repeat on a finished saga: %+v %v", again, err)
	}
	// A new signal to the finished saga, or to none, is refused.
	if _, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "e-1", Name: "approved"}); !errors.Is(err, saga.ErrNotReceiving) {
		t.Fatalf("to a finished saga: %v", err)
	}
	if _, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "nobody", Name: "approved"}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("to no saga: %v", err)
	}
}

// A signal to a saga that awaits it is one transition; the await's
// timer, which fires later, finds the next version and is dropped.
func TestSignalToAnAwaitingSagaAndTheTimeoutRace(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/expense.yaml")
	ctx := context.Background()
	r.start("e-2", map[string]any{"amount": 5})
	r.start("e-3", map[string]any{"amount": 6})
	r.drain() // file runs in both; both await
	for _, id := range []string{"e-2", "e-3"} {
		if st := r.get(id); st.Status != durable.StatusWaiting {
			t.Fatalf("%s: %s", id, st.Status)
		}
	}
	d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "e-2", Name: "approved", Payload: map[string]any{"by": "cy"}})
	if err != nil || d.Receipt != saga.ReceiptApplied || d.State.Status != durable.StatusRunning {
		t.Fatalf("signal: %+v %v", d, err)
	}
	// e-3 times out first; the signal after it is kept for a later await
	// (there is none: it stays kept), never applied to the await that
	// timed out.
	r.drain()
	r.clock.Advance(73 * time.Hour)
	if _, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("e-2"); st.Status != durable.StatusSucceeded {
		t.Fatalf("e-2: %s %+v", st.Status, st.Failure)
	}
	st := r.get("e-3")
	if st.Status != durable.StatusSucceeded || st.Vars["decision"] != nil || callsOf(r, "e-3/escalate/3") != 1 {
		t.Fatalf("e-3: %s vars %v escalate %d", st.Status, st.Vars, callsOf(r, "e-3/escalate/3"))
	}
}

// A callback step: the action gets a token and returns; the saga waits,
// its step on the compensation stack; completing the token goes on. A
// completion from inside the action (a webhook faster than the action's
// return) is kept and taken when the action returns.
func TestCallbackThroughTheCoordinator(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/charge.yaml")
	ctx := context.Background()
	var token string
	r.reg.Register("payments.charge_async", func(ctx context.Context, c saga.Call) (any, error) {
		token = c.CallbackToken
		n, _ := r.calls.LoadOrStore(c.IdempotencyKey, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		if c.SagaID == "fast" {
			if d, err := r.coord.CompleteCallback(ctx, c.CallbackToken, map[string]any{"id": "ch-fast"}); err != nil || d.Receipt != saga.ReceiptKept {
				t.Errorf("early completion: %+v %v", d, err)
			}
		}
		return map[string]any{"id": "pending-" + c.SagaID}, nil
	})
	r.start("slow", map[string]any{"amount": 3})
	r.drain()
	st := r.get("slow")
	if st.Status != durable.StatusWaiting || token == "" {
		t.Fatalf("after charge: %s token %q", st.Status, token)
	}
	d, err := r.coord.CompleteCallback(ctx, token, map[string]any{"id": "ch-1"})
	if err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("complete: %+v %v", d, err)
	}
	if d, err := r.coord.CompleteCallback(ctx, token, map[string]any{"id": "ch-2"}); err != nil || d.Receipt != saga.ReceiptDuplicate {
		t.Fatalf("twice: %+v %v", d, err)
	}
	r.drain()
	if st := r.get("slow"); st.Status != durable.StatusSucceeded || st.Vars["payment"].(map[string]any)["id"] != "ch-1" {
		t.Fatalf("slow: %s %v", st.Status, st.Vars)
	}

	r.start("fast", map[string]any{"amount": 4})
	r.drain()
	if st := r.get("fast"); st.Status != durable.StatusSucceeded || st.Vars["payment"].(map[string]any)["id"] != "ch-fast" || callsOf(r, "fast/charge/1") != 1 {
		t.Fatalf("fast: %s %v", st.Status, st.Vars)
	}

	// A failed callback retries with a new token; the old token is refused.
	r.start("fails", map[string]any{"amount": 5})
	r.drain()
	first := token
	if d, err := r.coord.FailCallback(ctx, first, "Declined", "card declined"); err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("fail: %+v %v", d, err)
	}
	r.drain()
	if token == first {
		t.Fatal("the retry got the same token")
	}
	if _, err := r.coord.CompleteCallback(ctx, first+"x", nil); !errors.Is(err, saga.ErrBadToken) {
		t.Fatalf("a damaged token: %v", err)
	}
	// The second attempt times out: the step fails, and the charge is
	// compensated (its work may have happened).
	r.clock.Advance(2 * time.Hour)
	if _, err := r.coord.Tick(ctx, &engine.TickParams{}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("fails"); st.Status != durable.StatusCompensated || st.Failure.Type != "Timeout" {
		t.Fatalf("fails: %s %+v", st.Status, st.Failure)
	}
	if n := callsOf(r, "fails/charge.compensate/1"); n != 1 {
		t.Fatalf("refund ran %d times, want 1", n)
	}
	if _, err := r.coord.CompleteCallback(ctx, token, nil); !errors.Is(err, saga.ErrNotReceiving) {
		t.Fatalf("after the saga ended: %v", err)
	}
}

// A signal whose write lands and whose send fails is retried by its
// sender with the same id: the retry is a duplicate, and sends the
// stored outbox again, delayed 15 minutes (so that it never runs an
// attempt beside a worker running it), and the saga goes on then.
func TestSignalRetryAfterALostSendSendsTheOutbox(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/expense.yaml")
	ctx := context.Background()
	r.start("e-9", map[string]any{"amount": 1})
	r.drain()
	r.queue.failSends.Store(1)
	p := &engine.SignalParams{SagaID: "e-9", Name: "approved", Payload: map[string]any{"by": "dee"}, ID: "once"}
	if _, err := r.coord.Signal(ctx, p); err == nil {
		t.Fatal("the failed send was not reported")
	}
	d, err := r.coord.Signal(ctx, p)
	if err != nil || d.Receipt != saga.ReceiptDuplicate {
		t.Fatalf("retry: %+v %v", d, err)
	}
	r.drain()
	if st := r.get("e-9"); st.Status != durable.StatusRunning || callsOf(r, "e-9/pay/3") != 0 {
		t.Fatalf("before the fallback is due: %s, pay ran %d times", st.Status, callsOf(r, "e-9/pay/3"))
	}
	r.clock.Advance(durable.MaxDelay)
	r.drain()
	if st := r.get("e-9"); st.Status != durable.StatusSucceeded || callsOf(r, "e-9/pay/3") != 1 {
		t.Fatalf("after the retry: %s, pay ran %d times", st.Status, callsOf(r, "e-9/pay/3"))
	}
}

// A signal whose write landed and whose send was lost (the kill test
// makes it happen) leaves the next attempt's message unsent; a cancel then
// cannot tell that attempt from one in flight, so it keeps it pending and
// sends its copy only as the fallback delayed 15 minutes (running it at
// once could run it beside a worker running it now). So the saga runs the
// action at the fallback, 15 minutes after the cancel, then compensates:
// late, never lost nor doubled. The sender's retry and the sweep re-send
// that same delayed copy. (docs/PROTOCOL.md, "Signals and callbacks".)
func TestCancelAfterALostSignalSendRunsTheAttemptAtTheFallback(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/expense.yaml")
	ctx := context.Background()
	r.start("e-10", map[string]any{"amount": 1})
	r.drain() // file ran; the saga awaits
	r.queue.failSends.Store(1)
	p := &engine.SignalParams{SagaID: "e-10", Name: "approved", Payload: map[string]any{"by": "eve"}, ID: "lost"}
	if _, err := r.coord.Signal(ctx, p); err == nil {
		t.Fatal("the failed send was not reported")
	}
	if _, err := r.coord.Cancel(ctx, "e-10"); err != nil {
		t.Fatal(err)
	}
	if d, err := r.coord.Signal(ctx, p); err != nil || d.Receipt != saga.ReceiptDuplicate {
		t.Fatalf("retry: %+v %v", d, err)
	}
	r.drain()
	r.clock.Advance(time.Minute)
	if _, err := r.coord.Sweep(ctx, &engine.SweepParams{IdleFor: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if st := r.get("e-10"); st.Status != durable.StatusRunning || !st.CancelRequested || callsOf(r, "e-10/pay/3") != 0 {
		t.Fatalf("a minute after the cancel: %s, cancel requested %v, pay ran %d times; want running, the attempt kept for its fallback", st.Status, st.CancelRequested, callsOf(r, "e-10/pay/3"))
	}
	r.clock.Advance(durable.MaxDelay)
	r.drain()
	st := r.get("e-10")
	if st.Status != durable.StatusCompensated || callsOf(r, "e-10/pay/3") != 1 || callsOf(r, "e-10/file.compensate/1") != 1 {
		t.Fatalf("after the fallback: %s, pay ran %d times, file compensated %d times; want compensated, each once", st.Status, callsOf(r, "e-10/pay/3"), callsOf(r, "e-10/file.compensate/1"))
	}
}

// A signal that would take a saga's state past its limit is refused
// (ErrKeptFull, "no room"), however few are kept: the saga is unchanged
// and goes on when the signal it awaits comes (its pay step runs).
func TestAKeepThatWouldNotFitIsRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t, "testdata/expense_review.yaml")
	ctx := context.Background()
	big := strings.Repeat("x", saga.MaxStateBytes-20<<10)
	r.reg.Register("expenses.file", func(context.Context, saga.Call) (any, error) {
		return map[string]any{"id": "c-1", "note": big}, nil
	})
	var paid atomic.Int64
	r.reg.Register("payments.pay", func(context.Context, saga.Call) (any, error) {
		paid.Add(1)
		return map[string]any{}, nil
	})
	r.start("e-11", map[string]any{"amount": 1})
	r.drain() // the saga awaits, its state 20 KiB under the limit
	before := r.get("e-11")
	payload := map[string]any{"text": strings.Repeat("y", 30<<10)}
	if _, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "e-11", Name: "reviewed", Payload: payload}); !errors.Is(err, saga.ErrKeptFull) || !strings.Contains(err.Error(), "no room") {
		t.Fatalf("a keep past the state limit: %v", err)
	}
	if after := r.get("e-11"); after.Version != before.Version || after.Received != before.Received || len(after.Kept) != 0 {
		t.Fatalf("the refusal changed the saga: version %d→%d, received %d→%d", before.Version, after.Version, before.Received, after.Received)
	}
	if d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "e-11", Name: "approved", Payload: map[string]any{"by": "fay"}}); err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("the awaited signal: %+v %v", d, err)
	}
	r.drain()
	if paid.Load() != 1 {
		t.Fatalf("after the awaited signal pay ran %d times, want 1", paid.Load())
	}
}

// Keeping a signal is one write beside the version, which changes neither
// the version nor the outbox: it sends nothing. A copy of the action's
// message would cost a send, a receive, a read, a delete and an
// invocation, or a second handling of the same version (bench's
// TestCallbackCost counts them).
func TestAKeptSignalSendsNoMessage(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/expense.yaml")
	r.start("e-kept", map[string]any{"amount": 3})
	if n := r.q.Len(durable.QueueAdvance); n != 1 {
		t.Fatalf("after the start the advance queue holds %d messages, want file's 1", n)
	}
	d, err := r.coord.Signal(context.Background(), &engine.SignalParams{SagaID: "e-kept", Name: "approved", Payload: map[string]any{"by": "ann"}, ID: "s-1"})
	if err != nil || d.Receipt != saga.ReceiptKept {
		t.Fatalf("signal before the await: %+v %v", d, err)
	}
	if n := r.q.Len(durable.QueueAdvance); n != 1 {
		t.Errorf("after a kept signal the advance queue holds %d messages, want 1: the kept write sent the outbox again", n)
	}
}

// Keeping a delivery is no transition: the stored outbox of the version
// is not sent again. A signal kept while an action is pending (or an
// early callback completion) that sent the action's message again at once
// would let a second worker take the copy and run the attempt beside the
// one running it. docs/PROTOCOL.md says of a keep "the messages in flight
// stay valid: nothing is re-sent"; the cancel's fallback copy is delayed
// by durable.MaxDelay precisely so that "no second worker runs the action
// beside the one running it now".
func TestAKeptSignalNeverRunsThePendingActionTwice(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/expense.yaml")
	ctx := context.Background()
	var files atomic.Int64
	r.reg.Register("expenses.file", func(ctx context.Context, c saga.Call) (any, error) {
		if files.Add(1) == 1 {
			// Another worker takes whatever message is queued now.
			ds, err := r.q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1})
			if err != nil {
				t.Error(err)
			}
			for _, d := range ds {
				engine.HandleDelivery(ctx, r.coord, r.q, d, nil)
			}
		}
		return map[string]any{"id": "claim-1"}, nil
	})
	r.start("e-1", map[string]any{"amount": 3})
	sent := r.queue.sent.Load()
	if d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "e-1", Name: "approved", Payload: map[string]any{"by": "ann"}, ID: "mail-1"}); err != nil || d.Receipt != saga.ReceiptKept {
		t.Fatalf("the signal: %+v %v", d, err)
	}
	if n := r.queue.sent.Load() - sent; n != 0 {
		t.Errorf("keeping the signal sent %d messages (the pending action's message again), want none", n)
	}
	r.drain()
	if st := r.get("e-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("saga %s %+v", st.Status, st.Failure)
	}
	if n := files.Load(); n != 1 {
		t.Fatalf("expenses.file ran %d times for one attempt, concurrently: the keep sent its message again", n)
	}
}

// A repeated signal (a webhook retried) while the saga's next action runs
// does not run that action again: a copy of its message visible at once
// would run the same attempt beside the one running it, and a sender's
// retry would make an action run twice. (A repeated cancel's copy of a
// running action's message is delayed by durable.MaxDelay for the same
// reason.)
func TestARepeatedSignalDoesNotRunThePendingActionAgain(t *testing.T) {
	t.Parallel()
	r := newRig(t, "../saga/testdata/valid/expense.yaml")
	ctx := context.Background()
	var pays atomic.Int64
	r.reg.Register("payments.pay", func(ctx context.Context, c saga.Call) (any, error) {
		if pays.Add(1) == 1 {
			// While pay runs, the approval's sender retries its signal.
			if d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: c.SagaID, Name: "approved", Payload: map[string]any{"by": "ann"}, ID: "mail-1"}); err != nil || d.Receipt != saga.ReceiptDuplicate {
				t.Errorf("the repeat: %+v %v", d, err)
			}
			// Another worker takes whatever message is queued now.
			ds, err := r.q.Receive(ctx, &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 1})
			if err != nil {
				t.Error(err)
			}
			for _, d := range ds {
				engine.HandleDelivery(ctx, r.coord, r.q, d, nil)
			}
		}
		return map[string]any{"id": "pay-1"}, nil
	})
	r.start("e-1", map[string]any{"amount": 3})
	r.drain() // file runs; the saga awaits the approval (72h: no timer message)
	if d, err := r.coord.Signal(ctx, &engine.SignalParams{SagaID: "e-1", Name: "approved", Payload: map[string]any{"by": "ann"}, ID: "mail-1"}); err != nil || d.Receipt != saga.ReceiptApplied {
		t.Fatalf("the signal: %+v %v", d, err)
	}
	r.drain()
	if st := r.get("e-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("saga %s %+v", st.Status, st.Failure)
	}
	if n := pays.Load(); n != 1 {
		t.Fatalf("payments.pay ran %d times for one attempt, concurrently: the repeated signal re-sent its message while it ran", n)
	}
}
