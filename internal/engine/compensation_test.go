package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// What a compensation reads, and how an operator skips one that failed.

func TestSkipCompensationAfterManualUndo(t *testing.T) {
	t.Parallel()
	// The charge's refund reads an output that could not be kept: the saga
	// parks; the operator refunds by hand and resumes with skip, and the
	// compensations before it run.
	src := `
saga: skip
steps:
  - id: reserve
    action: inv.reserve
    compensate: {action: inv.release}
  - id: charge
    action: pay.charge
    out: payment
    compensate: {action: pay.refund, with: {id: "${vars.payment.id}"}}
  - id: fail
    fail: {error: Nope}
`
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Step == "charge" && !c.Compensation {
			return map[string]any{"id": strings.Repeat("p", 2*saga.MaxStateBytes)}, nil
		}
		return nil, nil
	})
	e.start("s-1", nil)
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusCompensationFailed || !strings.Contains(st.CompensationError.Message, "resume with --skip") {
		t.Fatalf("status %s %+v, want parked at the refund, saying how to go on", st.Status, st.CompensationError)
	}
	if _, err := e.coord.SkipCompensation(context.Background(), "s-1"); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if st := e.get("s-1"); st.Status != durable.StatusCompensated {
		t.Fatalf("after skip: %s", st.Status)
	}
	if got := e.succeeded(); got != "reserve charge reserve.compensate" {
		t.Fatalf("calls %q", got)
	}
}

// A skip that comes after a plain resume has landed skips nothing: the
// resume already sent the failed compensation on its way, so the skip is
// refused (the operator who undid the step by hand must not see it undone
// a second time behind a success).
func TestSkipAfterAResumeIsRefused(t *testing.T) {
	t.Parallel()
	src := `
saga: skip
steps:
  - id: charge
    action: pay.charge
    compensate: {action: pay.refund}
  - id: fail
    fail: {error: Nope}
`
	refunds := 0
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Compensation {
			refunds++
			if refunds == 1 {
				return nil, saga.Permanent(errors.New("refund service down"))
			}
		}
		return nil, nil
	})
	e.start("s-1", nil)
	e.drain()
	if st := e.get("s-1"); st.Status != durable.StatusCompensationFailed {
		t.Fatalf("status %s, want parked", st.Status)
	}
	if _, err := e.coord.Resume(context.Background(), "s-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.coord.SkipCompensation(context.Background(), "s-1"); !errors.Is(err, saga.ErrInvalidEvent) {
		t.Fatalf("skip after a resume: %v, want ErrInvalidEvent (nothing was skipped)", err)
	}
	// A plain resume retried is still a retry.
	if _, err := e.coord.Resume(context.Background(), "s-1"); err != nil {
		t.Fatalf("resume retried: %v", err)
	}
	e.drain()
	if st := e.get("s-1"); st.Status != durable.StatusCompensated || refunds != 2 {
		t.Fatalf("status %s after %d refund calls, want compensated after the resumed refund", st.Status, refunds)
	}
}

func TestCompensationReadsItsOwnOutput(t *testing.T) {
	t.Parallel()
	// Two steps write vars.p, and a set overwrites it: each refund must
	// read the payment of its own step.
	src := `
saga: own
steps:
  - {id: a, action: pay.charge, out: p, compensate: {action: pay.refund, with: {id: "${vars.p.id}"}}}
  - {id: b, action: pay.charge, out: p, compensate: {action: pay.refund, with: {id: "${vars.p.id}"}}}
  - {id: c, action: pay.charge, out: q, compensate: {action: pay.refund, with: {id: "${vars.q.id}"}}}
  - {id: over, set: {q: "${{'id': 'overwritten'}}"}}
  - {id: f, fail: {error: Nope}}
`
	var refunds []string
	var mu sync.Mutex
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		if c.Compensation {
			in, _ := c.Input.(map[string]any)
			mu.Lock()
			refunds = append(refunds, c.Step+":"+fmt.Sprint(in["id"]))
			mu.Unlock()
			return nil, nil
		}
		return map[string]any{"id": c.Step + "-pay"}, nil
	})
	e.start("s-1", nil)
	e.drain()
	if got, want := strings.Join(refunds, " "), "c:c-pay b:b-pay a:a-pay"; got != want {
		t.Fatalf("refunds %q, want %q", got, want)
	}
}

func TestDroppedOutputIsNotReadFromAnEarlierStep(t *testing.T) {
	t.Parallel()
	// Two steps write vars.p; the second's output is too large to keep. Its
	// refund must not be built from the first step's p.
	src := `
saga: k
steps:
  - {id: a, action: pay.charge, with: {n: 1}, out: p, compensate: {action: pay.refund, with: {id: "${vars.p.id}"}}}
  - {id: b, action: pay.charge, with: {n: 2}, out: p, compensate: {action: pay.refund, with: {id: "${vars.p.id}"}}}
  - {id: c, action: svc.c}
`
	var refunds []string
	var mu sync.Mutex
	e := newEdgeRig(t, src, func(ctx context.Context, c saga.Call) (any, error) {
		in, _ := c.Input.(map[string]any)
		switch {
		case c.Compensation:
			mu.Lock()
			refunds = append(refunds, c.Step+":"+fmt.Sprint(in["id"]))
			mu.Unlock()
			return nil, nil
		case c.Step == "b":
			return map[string]any{"id": "pay-2", "pad": strings.Repeat("x", 2*saga.MaxStateBytes)}, nil
		}
		return map[string]any{"id": "pay-1"}, nil
	})
	e.start("s-1", nil)
	e.drain()
	st := e.get("s-1")
	if st.Status != durable.StatusCompensationFailed || st.CompensationError.Step != "b" {
		t.Fatalf("status %s %+v, want parked at b's refund (its output was not kept)", st.Status, st.CompensationError)
	}
	if len(refunds) != 0 {
		t.Fatalf("refunds %v: b's refund was built from a's payment", refunds)
	}
	if msg := st.CompensationError.Error(); strings.Count(msg, "ExpressionError") != 1 || strings.Count(msg, "step b") != 1 {
		t.Fatalf("compensation error %q repeats its type or step", msg)
	}
}
