package client_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

const approval = `
saga: approval
steps:
  - id: wait_approval
    await: {signal: approved, timeout: 1h}
    out: decision
  - id: done
    succeed: {output: "${vars.decision}"}
`

// A deployed saga starts by name; a signal-with-start starts it once and
// signals it every time.
func TestDeployThenStartByNameAndSignalWithStart(t *testing.T) {
	c, err := client.New(client.Config{Store: memstore.New(), Queue: memqueue.New(memqueue.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Start(ctx, client.StartParams{Name: "approval", SagaID: "a-1"}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("start of a name not deployed: %v, want ErrNotFound", err)
	}
	plan, err := saga.Compile("approval.yaml", []byte(approval), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := c.Deploy(ctx, plan)
	if err != nil || len(ds) != 1 || !ds[0].Changed || ds[0].Hash != plan.Hash() {
		t.Fatalf("deploy: %+v, %v", ds, err)
	}
	st, err := c.Start(ctx, client.StartParams{Name: "approval", SagaID: "a-1"})
	if err != nil || st.DefinitionHash != plan.Hash() {
		t.Fatalf("start by name: %v, %v", st, err)
	}
	start := client.StartParams{Name: "approval", SagaID: "b-1"}
	res, err := c.SignalWithStart(ctx, start, "approved", map[string]any{"ok": true}, client.SignalID("d-1"))
	if err != nil || !res.Started || res.Delivered.Receipt != saga.ReceiptApplied {
		t.Fatalf("signal-with-start: %+v, %v", res, err)
	}
	res, err = c.SignalWithStart(ctx, start, "approved", map[string]any{"ok": true}, client.SignalID("d-1"))
	if err != nil || res.Started || res.Delivered.Receipt != saga.ReceiptDuplicate {
		t.Fatalf("signal-with-start again: %+v, %v", res, err)
	}
}
