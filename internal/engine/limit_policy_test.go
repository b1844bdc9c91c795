package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Limits on the emulators, each call signed as the principal that makes
// it in AWS, so that the recording proxies of make test attribute it and
// the IAM check evaluates it against that principal's policy in
// infra/template.yaml (internal/iamcheck): the operator sets, lists and
// unsets limits; the advance function reads them, counts a call in its
// window, is refused one (the condition fails), leases and releases a
// slot; the compensate function does the same for a compensation.
func TestLimitsOnTheEmulatorsSignAsTheirPrincipals(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opStore, opQueue := b.As(t, awslocal.OperatorPrincipal)
	op, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: opStore, Queue: opQueue})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []durable.Limit{{Action: "svc.pay", Rate: 1, Burst: 1, Concurrency: 2}, {Action: "svc.refund", Rate: 1, Burst: 1, Concurrency: 2}, {Action: "svc.other", Concurrency: 1}} {
		if err := op.SetLimit(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := op.UnsetLimit(ctx, "svc.other"); err != nil {
		t.Fatal(err)
	}
	if ls, err := op.Limits(ctx); err != nil || len(ls) != 2 {
		t.Fatalf("limits: %v %v", ls, err)
	}
	reg := engine.NewRegistry()
	reg.SetFallback(func(_ context.Context, c saga.Call) (any, error) {
		if c.Action == "svc.ship" {
			return nil, saga.Permanent(errors.New("no carrier"))
		}
		return map[string]any{"id": c.Step + "-1"}, nil
	})
	coordAs := func(principal string) *engine.Coordinator {
		store, queue := b.As(t, principal)
		c, err := engine.NewCoordinator(engine.CoordinatorConfig{Store: store, Queue: queue, Actions: reg, ChainSteps: -1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	by := map[durable.QueueName]*engine.Coordinator{durable.QueueAdvance: coordAs("AdvanceFunction"), durable.QueueCompensate: coordAs("CompensateFunction")}
	plan := mustCompile(t, limitedSaga)
	for _, id := range []string{"p-1", "p-2"} {
		if _, err := op.Start(ctx, &engine.StartParams{Plan: plan, SagaID: id}); err != nil {
			t.Fatal(err)
		}
	}
	deferred := 0
	for _, id := range []string{"p-1", "p-2"} {
		for {
			st, err := op.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status.Final() {
				if st.Status != durable.StatusCompensated {
					t.Fatalf("saga %s: %s", id, st.Status)
				}
				break
			}
			for qn, c := range by {
				ds, err := b.Queue.Receive(ctx, &durable.ReceiveParams{Queue: qn, Max: 10, Wait: 100 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range ds {
					out, err := c.Handle(ctx, d.Body)
					if err != nil {
						t.Fatalf("%s: %v", qn, err)
					}
					if out == engine.HandledDeferred {
						deferred++
					}
					if err := b.Queue.Delete(ctx, &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	if deferred == 0 {
		t.Fatal("no call deferred: the refused requests were not made")
	}
}
