package saga_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

var (
	mustCompile     = sagatest.MustCompile
	mustCompileFile = sagatest.MustCompileFile
	decodeInput     = sagatest.DecodeInput
	orderIn         = sagatest.OrderInput
)

// behaviour says what an action does on each call: output and error by
// action name and attempt.
type behaviour func(c saga.Call) (any, error)

// run is a saga driven to a final status in memory, with everything it did.
type run struct {
	st       *saga.State
	trace    []string // "step:outcome" or "step.compensate:outcome", in order
	calls    []saga.Call
	delays   []time.Duration
	outboxes [][]durable.Message // what each transition sent
}

// drive starts a saga and answers every pending call with act until the
// saga is final or waits for nothing. A nil act succeeds with the input.
func drive(t testing.TB, p *saga.Plan, input map[string]any, act behaviour) *run {
	t.Helper()
	r := &run{st: &saga.State{}}
	now := t0
	onStep := func(rec saga.StepRecord) {
		name := rec.Step
		if rec.Compensation {
			name += ".compensate"
		}
		r.trace = append(r.trace, fmt.Sprintf("%s:%s", name, rec.Outcome))
		if rec.Outcome == saga.OutcomeRetrying {
			r.delays = append(r.delays, rec.Delay)
		}
	}
	in, err := p.CheckInput(input)
	if err != nil {
		t.Fatalf("input: %v", err)
	}
	if err := p.Advance(r.st, saga.Event{Kind: saga.EventStart, Now: now, SagaID: "s-1", Input: in, OnStep: onStep, Rand: 0.5}); err != nil {
		t.Fatalf("start: %v", err)
	}
	r.outboxes = append(r.outboxes, slices.Clone(r.st.Outbox)) // the next transition reuses the outbox
	for range 1000 {
		if _, ok := r.st.Pending(); !ok {
			return r
		}
		now = now.Add(time.Second)
		call, err := p.Call(r.st, now)
		var out any
		if err != nil {
			err = saga.Permanent(err)
		} else {
			r.calls = append(r.calls, call)
			out = call.Input
			if act != nil {
				out, err = act(call)
			}
		}
		if err := p.Advance(r.st, saga.Event{Kind: saga.EventResult, Now: now, Output: out, Err: err, OnStep: onStep, Rand: 0.5}); err != nil {
			t.Fatalf("advance: %v", err)
		}
		r.outboxes = append(r.outboxes, slices.Clone(r.st.Outbox))
	}
	t.Fatalf("saga did not finish in 1000 transitions")
	return nil
}

// failing returns a behaviour where the named calls ("step" or
// "step.compensate") fail permanently, and the rest echo their input with
// an id and a captured status.
func failing(names ...string) behaviour {
	return func(c saga.Call) (any, error) {
		name := c.Step
		if c.Compensation {
			name += ".compensate"
		}
		for _, n := range names {
			if n == name {
				return nil, saga.Permanent(saga.NewError("Declined", "no"))
			}
		}
		return map[string]any{"id": c.Step + "-1", "status": "captured"}, nil
	}
}

func join(xs []string) string { return strings.Join(xs, " ") }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func equalValues(a, b any) bool { return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b) }

// startFiles compiles files (main.yaml the saga) and starts saga s-1
// with no input.
func startFiles(t *testing.T, files map[string]string) (*saga.Plan, *saga.State) {
	t.Helper()
	p, err := compileFiles(files, forks)
	if err != nil {
		t.Fatal(err)
	}
	st := &saga.State{}
	if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "s-1", Input: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	return p, st
}

// launchChild starts child k of the fork st waits on, as the coordinator's
// launch does.
func launchChild(t *testing.T, p *saga.Plan, st *saga.State, k int) (*saga.Plan, *saga.State) {
	t.Helper()
	cp, cs, err := p.Launch(st, k)
	if err != nil {
		t.Fatal(err)
	}
	child := &saga.State{}
	id := durable.ChildID(st.SagaID, cs.Link.Step, cs.Link.Seq, k)
	if err := cp.Advance(child, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: id, Input: cs.Input, Child: cs, StoreLimit: saga.MaxStateBytes}); err != nil {
		t.Fatal(err)
	}
	return cp, child
}
