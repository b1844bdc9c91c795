package sagactl_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/sagactl"
)

const heldFile = "testdata/held.yaml"

// A held saga on the emulators, with an embedded runtime on the same
// table and queues standing in for the deployed functions: status and
// list show it held, retry runs the charge again under its key once the
// service is back, compensate and cancel undo it, and a verb on a saga
// that is not held is refused.
func TestHoldRetryCompensateAndCancelOnEmulators(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	var down atomic.Bool
	down.Store(true)
	var mu sync.Mutex
	keys := map[string][]string{} // charge's idempotency keys by saga
	undone := map[string][]string{}
	reg := engine.NewRegistry()
	reg.SetFallback(func(ctx context.Context, c saga.Call) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case c.Compensation:
			undone[c.SagaID] = append(undone[c.SagaID], c.Step)
		case c.Step == "charge":
			keys[c.SagaID] = append(keys[c.SagaID], c.IdempotencyKey)
			if down.Load() {
				return nil, errors.New("card service unavailable")
			}
		}
		return map[string]any{"id": c.Step + "-" + c.SagaID}, nil
	})
	rt, err := embedded.Start(embedded.Config{Actions: reg, Store: b.Store, Queue: b.Queue, Receiver: b.Queue, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	where := []string{"--table", b.Table, "--advance-queue-url", b.URLs[durable.QueueAdvance], "--compensate-queue-url", b.URLs[durable.QueueCompensate],
		"--dynamodb-endpoint", b.DynamoDBEndpoint, "--sqs-endpoint", b.SQSEndpoint}
	cmd := func(args ...string) result { return runSagactl(t, nil, append(args, where...)...) }
	waitFor := func(id string, want durable.Status) *saga.State {
		t.Helper()
		for range 2000 {
			if st, err := rt.Coordinator.Get(context.Background(), id); err == nil && st.Status == want {
				return st
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("saga %s never %s", id, want)
		return nil
	}
	for _, id := range []string{"h-1", "h-2", "h-3"} {
		if r := cmd("start", heldFile, "--input", `{}`, "--id", id); r.code != sagactl.ExitOK {
			t.Fatalf("start %s: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
		}
		waitFor(id, durable.StatusHeld)
	}
	r := cmd("status", "h-1")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "saga h-1 (held-order): held") || !strings.Contains(r.stdout, "held on: charge after 2 attempt(s)") ||
		!strings.Contains(r.stdout, "compensates at ") || !strings.Contains(r.stdout, "card service unavailable") {
		t.Fatalf("status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = cmd("list", "--status", "held"); r.code != sagactl.ExitOK || strings.Count(r.stdout, "held-order") != 3 {
		t.Fatalf("list --status held: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	down.Store(false)
	if r = cmd("retry", "h-1"); r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "saga h-1 (held-order): running") {
		t.Fatalf("retry: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitFor("h-1", durable.StatusSucceeded)
	mu.Lock()
	if k := keys["h-1"]; len(k) != 3 || k[0] != k[1] || k[1] != k[2] {
		t.Errorf("charge's keys across the hold: %q, want three of one key", k)
	}
	mu.Unlock()

	if r = cmd("compensate", "h-2"); r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "compensating") {
		t.Fatalf("compensate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st := waitFor("h-2", durable.StatusCompensated)
	if st.Failure == nil || st.Failure.Step != "charge" {
		t.Errorf("h-2 compensated for %+v, want charge's failure", st.Failure)
	}
	if r = cmd("cancel", "h-3"); r.code != sagactl.ExitOK {
		t.Fatalf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st = waitFor("h-3", durable.StatusCompensated)
	if st.Failure == nil || st.Failure.Type != lang.ErrorTypeCancelled {
		t.Errorf("h-3 compensated for %+v, want the cancel", st.Failure)
	}
	mu.Lock()
	if u := undone["h-2"]; len(u) != 1 || u[0] != "reserve" {
		t.Errorf("h-2 undid %q, want reserve", u)
	}
	if len(keys["h-2"]) != 2 {
		t.Errorf("h-2's charge ran %d times, want 2 (none after the hold)", len(keys["h-2"]))
	}
	mu.Unlock()

	for _, verb := range []string{"retry", "compensate"} {
		r = cmd(verb, "h-1")
		if r.code != sagactl.ExitUsage || !strings.Contains(r.stderr, "only held sagas are retried or compensated") {
			t.Errorf("%s of a succeeded saga: exit %d\n%s%s", verb, r.code, r.stdout, r.stderr)
		}
	}
}

// run reports a held saga at once with its own exit code, rather than
// waiting for --timeout.
func TestRunExitsHeldWhenAStepFailsForGood(t *testing.T) {
	t.Parallel()
	r := runSagactl(t, nil, "run", heldFile, "--input", `{}`, "--fail", "charge", "--timeout", "30s")
	if r.code != sagactl.ExitHeld || !strings.Contains(r.stdout, "saga ") || !strings.Contains(r.stdout, " held in ") ||
		!strings.Contains(r.stdout, "held for an operator: sagactl retry ") {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// plan and cost walk a held saga as an operator's compensate would end
// it, and say so.
func TestPlanAndCostWalkAHeldSagaToItsCompensation(t *testing.T) {
	t.Parallel()
	in := `{}`
	r := runSagactl(t, nil, "plan", heldFile, "--fail", "charge", "--input", in)
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, "on_failure: hold: the saga is held first") || !strings.Contains(r.stdout, "1. undo reserve") {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runSagactl(t, nil, "cost", heldFile, "--fail", "charge", "--input", in, "--json")
	if r.code != sagactl.ExitOK || !strings.Contains(r.stdout, `"held",`) || !strings.Contains(r.stdout, `"compensating"`) {
		t.Fatalf("cost: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
