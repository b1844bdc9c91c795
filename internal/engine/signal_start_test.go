package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A saga that waits for its approval from its first step.
const approvalSaga = `
saga: approval
steps:
  - id: wait_approval
    await: {signal: approved, timeout: 1h}
    out: decision
  - id: done
    succeed: {output: "${vars.decision}"}
`

// A saga that asks for its approval before it waits for it: a signal
// sent as it starts is kept until the await takes it.
const askThenAwaitSaga = `
saga: approval
steps:
  - id: ask
    action: mail.ask
  - id: wait_approval
    await: {signal: approved, timeout: 1h}
    out: decision
  - id: done
    succeed: {output: "${vars.decision}"}
`

func signalWithStart(r *rig, id, delivery string, input map[string]any) (*engine.SignalWithStartResult, error) {
	return r.coord.SignalWithStart(context.Background(), &engine.SignalWithStartParams{
		Start:  engine.StartParams{Plan: r.plan, SagaID: id, Input: input},
		Signal: engine.SignalParams{Name: "approved", Payload: map[string]any{"by": delivery}, ID: delivery},
	})
}

// A signal-with-start of a saga that does not exist starts it and
// delivers the signal: the saga goes on with its payload.
func TestSignalWithStartStartsTheSagaAndDelivers(t *testing.T) {
	r := newTextRig(t, approvalSaga)
	res, err := signalWithStart(r, "a-1", "d-1", map[string]any{"order": "o-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Started || res.Delivered == nil || res.Delivered.Receipt == saga.ReceiptDuplicate {
		t.Fatalf("result %+v, want started and delivered", res)
	}
	r.drain()
	st := r.get("a-1")
	if st.Status != durable.StatusSucceeded || !equalValues(st.Output, map[string]any{"by": "d-1"}) {
		t.Fatalf("saga %s with output %#v, want succeeded with the signal's payload", st.Status, st.Output)
	}
}

// A saga that exists is signalled as it is: the start's input is not
// compared (another input is no ErrExists) and the saga keeps its own.
func TestSignalWithStartSignalsAnExistingSagaWhateverTheInput(t *testing.T) {
	r := newTextRig(t, approvalSaga)
	r.start("a-1", map[string]any{"order": "o-1"})
	res, err := signalWithStart(r, "a-1", "d-1", map[string]any{"order": "another"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Started || res.Delivered.Receipt != saga.ReceiptApplied {
		t.Fatalf("result %+v, want not started, applied", res)
	}
	r.drain()
	if st := r.get("a-1"); st.Status != durable.StatusSucceeded || !equalValues(st.Input, map[string]any{"order": "o-1"}) {
		t.Fatalf("saga %s with input %#v, want succeeded with its own input", st.Status, st.Input)
	}
}

// A repeat of a signal-with-start that succeeded starts nothing and
// delivers the signal as a duplicate, by its id.
func TestSignalWithStartRepeatedIsADuplicate(t *testing.T) {
	r := newTextRig(t, approvalSaga)
	if _, err := signalWithStart(r, "a-1", "d-1", nil); err != nil {
		t.Fatal(err)
	}
	res, err := signalWithStart(r, "a-1", "d-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Started || res.Delivered.Receipt != saga.ReceiptDuplicate {
		t.Fatalf("repeat: %+v, want not started, duplicate", res)
	}
}

// A call that failed after creating the saga (its first message not
// sent) is finished by a retry: the first message is sent and the
// signal delivered, and the saga runs to its end.
func TestSignalWithStartRetryFinishesACallThatFailedAfterTheCreate(t *testing.T) {
	r := newTextRig(t, askThenAwaitSaga)
	r.queue.failSends.Store(1)
	res, err := signalWithStart(r, "a-1", "d-1", nil)
	if err == nil || res == nil || !res.Started || res.Delivered != nil {
		t.Fatalf("first call: %+v, %v; want an error after the saga was started, no delivery", res, err)
	}
	sent := r.queue.sent.Load()
	res, err = signalWithStart(r, "a-1", "d-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Started || res.Delivered.Receipt == saga.ReceiptDuplicate {
		t.Fatalf("retry: %+v, want not started, delivered", res)
	}
	if r.queue.sent.Load() == sent {
		t.Fatal("the retry sent no message: the first one was never sent")
	}
	r.drain()
	if st := r.get("a-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("saga %s, want succeeded", st.Status)
	}
}

// A call that failed after the start and before the signal (a store
// that failed the delivery's write) is finished by a retry.
func TestSignalWithStartRetryFinishesACallThatFailedBeforeTheSignal(t *testing.T) {
	r := newTextRig(t, approvalSaga)
	r.store.setHook(func(op, key string) error {
		if op == "update" {
			return durable.ErrThrottled
		}
		return nil
	})
	res, err := signalWithStart(r, "a-1", "d-1", nil)
	if !errors.Is(err, durable.ErrThrottled) || !res.Started {
		t.Fatalf("first call: %+v, %v; want started, then the store's error", res, err)
	}
	r.store.setHook(nil)
	res, err = signalWithStart(r, "a-1", "d-1", nil)
	if err != nil || res.Started || res.Delivered.Receipt != saga.ReceiptApplied {
		t.Fatalf("retry: %+v, %v; want not started, applied", res, err)
	}
	r.drain()
	if st := r.get("a-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("saga %s, want succeeded", st.Status)
	}
}

// Concurrent signal-with-starts of one id start the saga once, and each
// signal is delivered once: of those with one delivery id, one is
// applied or kept and the rest are duplicates.
func TestSignalWithStartConcurrentStartsOnce(t *testing.T) {
	r := newTextRig(t, askThenAwaitSaga)
	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		started int
		taken   int
	)
	for i := range n {
		wg.Go(func() {
			delivery := "d-1"
			if i%2 == 1 {
				delivery = "d-2"
			}
			res, err := signalWithStart(r, "a-1", delivery, nil)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if res.Started {
				started++
			}
			if res.Delivered.Receipt != saga.ReceiptDuplicate {
				taken++
			}
		})
	}
	wg.Wait()
	if started != 1 || taken != 2 {
		t.Fatalf("started %d times, took %d signals; want 1 and 2 (two delivery ids)", started, taken)
	}
	r.drain()
	if st := r.get("a-1"); st.Status != durable.StatusSucceeded {
		t.Fatalf("saga %s, want succeeded", st.Status)
	}
}

// A signal-with-start is for the saga it starts: a signal for another
// id, or no id, is refused; so is a signal that could not be delivered
// (a bad name, id or payload), before the saga is started.
func TestSignalWithStartRefusesBeforeStarting(t *testing.T) {
	r := newTextRig(t, approvalSaga)
	for _, p := range []*engine.SignalWithStartParams{
		{Start: engine.StartParams{Plan: r.plan}, Signal: engine.SignalParams{Name: "approved"}},
		{Start: engine.StartParams{Plan: r.plan, SagaID: "a-1"}, Signal: engine.SignalParams{SagaID: "b-1", Name: "approved"}},
		{Start: engine.StartParams{Plan: r.plan, SagaID: "a-1"}, Signal: engine.SignalParams{Name: "not a name"}},
		{Start: engine.StartParams{Plan: r.plan, SagaID: "a-1"}, Signal: engine.SignalParams{Name: "approved", ID: "not an id"}},
		{Start: engine.StartParams{Plan: r.plan, SagaID: "a-1"}, Signal: engine.SignalParams{Name: "approved", Payload: func() {}}},
	} {
		if _, err := r.coord.SignalWithStart(context.Background(), p); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if _, err := r.coord.Get(context.Background(), "a-1"); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("a refused signal-with-start left a saga: %v", err)
	}
}

// A signal-with-start whose signal no await of the saga's definition
// takes (in its own steps, its forks' or its child sagas') is refused
// before the saga is started: the start would leave a saga that can never
// get the signal it was started for, under a refusal that says nothing
// was done. A saga that exists gets the refusal of Signal, as before.
func TestSignalWithStartOfASignalNeverAwaitedStartsNothing(t *testing.T) {
	r := newTextRig(t, approvalSaga)
	p := &engine.SignalWithStartParams{
		Start:  engine.StartParams{Plan: r.plan, SagaID: "n-1"},
		Signal: engine.SignalParams{Name: "rejected", ID: "d-1"},
	}
	res, err := r.coord.SignalWithStart(context.Background(), p)
	if !errors.Is(err, saga.ErrNotReceiving) {
		t.Fatalf("signal-with-start of signal rejected: %+v, %v; want ErrNotReceiving", res, err)
	}
	if res != nil && res.Started {
		t.Fatalf("result %+v says started", res)
	}
	if _, err := r.coord.Get(context.Background(), "n-1"); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("the refused signal-with-start started the saga: %v", err)
	}
}
