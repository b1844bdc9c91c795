package engine_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// loopSaga runs one action per message forever (until input.stop).
const loopSaga = `
saga: loop
input: {stop: bool}
steps:
  - id: work
    action: noop
  - id: again
    switch:
      - {if: "input.stop", next: finish}
      - {default: work}
  - id: finish
    succeed: {}
`

// handlePass is one saga on the memory store and queue, ready to handle
// message after message: each pass decodes the message, loads the saga,
// runs the action, advances, writes and sends the next message.
type handlePass struct {
	coord *engine.Coordinator
	steps uint64 // the steps one pass runs: its message's and those it chains
	q     *memqueue.Queue
	msg   durable.Message
	body  []byte
	ctx   context.Context // nil: context.Background()
}

func newHandlePass(tb testing.TB) *handlePass { return newChainPass(tb, 0) }

// newChainPass is newHandlePass with passes that chain: each message runs
// its step and chained more (none: every pass is one step, its
// message's).
func newChainPass(tb testing.TB, chained int) *handlePass {
	reg := engine.NewRegistry()
	reg.MustRegister("noop", func(context.Context, saga.Call) (any, error) { return nil, nil })
	hp := &handlePass{q: memqueue.New(memqueue.Config{}), steps: uint64(chained) + 1}
	clock := durable.NewManualClock(t0)
	chainSteps := chained
	if chained == 0 {
		chainSteps = -1
	}
	var err error
	hp.coord, err = engine.NewCoordinator(engine.CoordinatorConfig{Store: memstore.New(), Queue: hp.q, Actions: reg, Clock: clock, Rand: func() float64 { return 0.5 }, ChainSteps: chainSteps})
	if err != nil {
		tb.Fatal(err)
	}
	st, err := hp.coord.Start(context.Background(), &engine.StartParams{Plan: loopPlan(tb), SagaID: "bench-saga-0001", Input: map[string]any{"stop": false}})
	if err != nil {
		tb.Fatal(err)
	}
	hp.msg = st.Outbox[0]
	hp.body = make([]byte, 0, 256)
	return hp
}

// loopPlan is loopSaga with no visit bound that a benchmark could reach:
// every pass is one more visit to work.
func loopPlan(tb testing.TB) *saga.Plan {
	p, err := saga.Compile("loop.yaml", []byte(loopSaga), saga.Options{MaxVisits: math.MaxInt})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func (hp *handlePass) once(tb testing.TB) {
	hp.body = durable.AppendMessage(hp.body[:0], hp.msg)
	ctx := hp.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if out, err := hp.coord.Handle(ctx, hp.body); err != nil || out != engine.HandledStep {
		tb.Fatalf("handle: %s %v", out, err)
	}
	hp.msg.Version += hp.steps
}

// drainQueue empties the queue the passes fill.
func (hp *handlePass) drainQueue() {
	for hp.q.Len(durable.QueueAdvance) > 0 {
		ds, _ := hp.q.Receive(context.Background(), &durable.ReceiveParams{Queue: durable.QueueAdvance, Max: 10})
		for _, d := range ds {
			_ = hp.q.Delete(context.Background(), &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle})
		}
	}
}

func BenchmarkCoordinator(b *testing.B) {
	b.Run("handle_step", func(b *testing.B) {
		hp := newHandlePass(b)
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			hp.once(b)
			if n++; n%100 == 0 {
				b.StopTimer()
				hp.drainQueue()
				b.StartTimer()
			}
		}
	})
	// A message that runs its step and chains 9 more: per step, divide
	// by 10.
	b.Run("handle_chain10", func(b *testing.B) {
		hp := newChainPass(b, 9)
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			hp.once(b)
			if n++; n%100 == 0 {
				b.StopTimer()
				hp.drainQueue()
				b.StartTimer()
			}
		}
	})
}

// TestChainedStepAllocs pins what a chained step allocates: a message
// that runs its own step and chains 9 more, less a pass of one step, is
// 9 chained steps.
func TestChainedStepAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	pass, chain := newHandlePass(t), newChainPass(t, 9)
	perPass := testing.AllocsPerRun(200, func() { pass.once(t) })
	perChain := testing.AllocsPerRun(200, func() { chain.once(t) })
	perStep := (perChain - perPass) / 9
	const pinnedChain = 48 // 21 for the message's own step, 3 for each chained one
	if perChain != pinnedChain {
		t.Errorf("a message chaining 9 steps: %v allocations (a pass of one step: %v; a chained step: %v), pinned at %d: update the pin (and bench/README.md) if this is intended", perChain, perPass, perStep, pinnedChain)
	}
	if perStep >= perPass {
		t.Errorf("a chained step allocates %v, a pass of one step %v: it must allocate less", perStep, perPass)
	}
}

// TestHandlePassAllocs pins the allocations of one handler pass exactly
// (budget: under 40, bench/README.md "Budgets").
func TestHandlePassAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	hp := newHandlePass(t)
	got := testing.AllocsPerRun(200, func() { hp.once(t) })
	const pinned, budget = 21, 40 // 1: the copy of the decoded state's history
	if got >= budget {
		t.Errorf("handler pass: %v allocations, budget is under %d", got, budget)
	}
	if got != pinned {
		t.Errorf("handler pass: %v allocations, pinned at %d: update the pin (and bench/README.md) if this is intended", got, pinned)
	}
	// As in Lambda: the invocation has a deadline (and the handler gives
	// its budget), so the action gets a context that ends before it.
	ctx, cancel := context.WithTimeout(engine.WithInvocationBudget(context.Background(), time.Hour), time.Hour)
	defer cancel()
	hp.ctx = ctx
	got = testing.AllocsPerRun(200, func() { hp.once(t) })
	const pinnedDeadline = 27 // the action's context: WithoutCancel and WithDeadline
	if got >= budget || got != pinnedDeadline {
		t.Errorf("handler pass with a deadline: %v allocations, pinned at %d (budget under %d)", got, pinnedDeadline, budget)
	}
}
