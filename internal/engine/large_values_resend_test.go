package engine_test

import (
	"context"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

const bigForkAwaitDefinition = `
saga: docs
input: {docs: list, more: string}
steps:
  - id: each
    foreach: "${input.docs}"
    as: doc
    steps:
      - id: use
        action: svc.use
        with: {doc: "${doc}", more: "${input.more}"}
  - id: wait
    await: {signal: approved, timeout: 1h}
`

// A signal-with-start retried after its first message was lost launches
// the children of the saga's first step from the saga's values, not from
// the references its state holds to them.
func TestSignalWithStartRetryLaunchesChildrenWithLargeValues(t *testing.T) {
	t.Parallel()
	r, _, _ := newObjectsRig(t)
	plan := mustCompile(t, bigForkAwaitDefinition)
	in := map[string]any{"docs": []any{big("a"), big("b")}, "more": big("m")}
	p := &engine.SignalWithStartParams{
		Start:  engine.StartParams{Plan: plan, SagaID: "d-1", Input: in},
		Signal: engine.SignalParams{Name: "approved", ID: "s-1"},
	}
	r.queue.failSends.Store(1)
	if _, err := r.coord.SignalWithStart(context.Background(), p); err == nil {
		t.Fatal("first call: no error, want its first message unsent")
	}
	if _, err := r.coord.SignalWithStart(context.Background(), p); err != nil {
		t.Fatalf("retry: %v", err)
	}
	parent := r.get("d-1")
	cur, _ := parent.Pending()
	for k := range 2 {
		child := r.get(durable.ChildID("d-1", "each", cur.Seq, k))
		if got, _ := child.Input["more"].(string); got != big("m") {
			t.Fatalf("child %d has input more %T %.40v, want the saga's value", k, child.Input["more"], child.Input["more"])
		}
	}
}
