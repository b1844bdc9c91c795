package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

type readCounter struct {
	durable.Store
	sagaGets, forkGets atomic.Int64
}

func (s *readCounter) SagaGet(ctx context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	s.sagaGets.Add(1)
	return s.Store.SagaGet(ctx, p)
}

func (s *readCounter) ForkGet(ctx context.Context, p *durable.ForkGetParams) (*durable.ForkRecord, error) {
	s.forkGets.Add(1)
	return s.Store.ForkGet(ctx, p)
}

// Routing a signal reads the current child of each lane of the fork the
// saga waits on, and theirs, down to lang.MaxForkDepth: one signal sent
// to a tree of nested foreach steps costs lanes^depth reads (here 10 lanes
// at two levels: 111 reads; four levels of 100 lanes: 10^8), paid by
// whoever may send a signal, synchronously in Signal. It should be
// bounded by one level's lanes.
func TestRoutingASignalReadsABoundedNumberOfRuns(t *testing.T) {
	r := newFrig(t, `
saga: deep
input: {items: list}
steps:
  - id: outer
    foreach: "${input.items}"
    concurrency: 10
    steps:
      - id: inner
        foreach: "${input.items}"
        concurrency: 10
        steps:
          - {id: ready, await: {signal: ready, timeout: 1h}}
          - {id: go, await: {signal: go, timeout: 1h}}
`, nil)
	items := []any{}
	for i := range 10 {
		items = append(items, i)
	}
	r.start("d-1", map[string]any{"items": items})
	r.drain()
	cs := &readCounter{Store: r.store.Store}
	c, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: cs, Queue: r.queue, Actions: engine.NewRegistry(), Clock: r.clock, Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Signal(context.Background(), &engine.SignalParams{SagaID: "d-1", Name: "go"})
	if err != nil {
		t.Fatal(err)
	}
	gets, forks := cs.sagaGets.Load(), cs.forkGets.Load()
	t.Logf("one signal: %s by %s after %d saga reads and %d fork reads", d.Receipt, d.State.SagaID, gets, forks)
	if gets+forks > 1+lang.MaxConcurrency {
		t.Fatalf("one signal read %d items of the store (lanes^depth): unbounded by anything but MaxForkDepth", gets+forks)
	}
}
