package saga_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

const waitSaga = `saga: cooling
input: {ship_at: timestamp}
timeout: 72h
steps:
  - id: reserve
    action: inventory.reserve
    compensate: {action: inventory.release}
  - id: cool_off
    wait: {for: 36h}
  - id: ship
    action: shipping.send
`

// A wait step parks the saga, status waiting, with a timer at its due
// time and no message when it is further off than a queue's delay; the
// timer event, at the due time, goes on with the next step.
func TestWaitParksTheSagaUntilItsTimer(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, waitSaga)
	st := &saga.State{}
	in, err := p.CheckInput(map[string]any{"ship_at": "2026-12-24T09:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	at := func(now time.Time, ev saga.Event) error {
		ev.Now = now
		return p.Advance(st, ev)
	}
	if err := at(t0, saga.Event{Kind: saga.EventStart, SagaID: "w-1", Input: in}); err != nil {
		t.Fatal(err)
	}
	if err := at(t0.Add(time.Second), saga.Event{Kind: saga.EventResult}); err != nil {
		t.Fatal(err)
	}
	due := t0.Add(time.Second + 36*time.Hour)
	cur, _ := st.Pending()
	if st.Status != durable.StatusWaiting || !cur.Wait || !cur.Due.Equal(due) || !st.WakeAt().Equal(due) || len(st.Outbox) != 0 {
		t.Fatalf("after reserve: %s, cursor %+v, wake %s, outbox %+v; want waiting until %s with no message (36h is past a queue's delay)", st.Status, cur, st.WakeAt(), st.Outbox, due)
	}
	rec, err := st.Record(nil)
	if err != nil || !rec.WakeAt.Equal(due) || rec.Status != durable.StatusWaiting {
		t.Fatalf("record: %+v %v", rec, err)
	}
	// The state keeps the timer through its encoding.
	var back saga.State
	if err := back.UnmarshalBinary(rec.State); err != nil || !back.WakeAt().Equal(due) {
		t.Fatalf("decoded: wake %s, %v", back.WakeAt(), err)
	}
	// Early: refused, and nothing changes.
	v := st.Version
	if err := at(due.Add(-time.Second), saga.Event{Kind: saga.EventTimer}); !errors.Is(err, saga.ErrInvalidEvent) || st.Version != v {
		t.Fatalf("an early timer: %v, version %d", err, st.Version)
	}
	if err := at(due, saga.Event{Kind: saga.EventTimer}); err != nil {
		t.Fatal(err)
	}
	if call, err := p.Call(st, due); err != nil || call.Step != "ship" || st.Status != durable.StatusRunning || !st.WakeAt().IsZero() {
		t.Fatalf("after the timer: %s, call %+v %v, wake %s", st.Status, call, err, st.WakeAt())
	}
}

// A wait within a queue's delay is its own message, delayed; an until in
// the past goes on at once; a timer set past the saga's deadline fires at
// the deadline, and the saga compensates then; a cancel compensates a
// waiting saga at once.
func TestWaitEdges(t *testing.T) {
	t.Parallel()
	start := func(t *testing.T, src string, input map[string]any) (*saga.Plan, *saga.State) {
		t.Helper()
		p := mustCompile(t, src)
		st := &saga.State{}
		in, err := p.CheckInput(input)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Advance(st, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "w-1", Input: in}); err != nil {
			t.Fatal(err)
		}
		return p, st
	}
	t.Run("short", func(t *testing.T) {
		_, st := start(t, "saga: s\nsteps:\n  - {id: pause, wait: {for: 90s}}\n  - {id: go, action: a}\n", nil)
		if st.Status != durable.StatusWaiting || len(st.Outbox) != 1 || st.Outbox[0].Delay != 90*time.Second || st.Outbox[0].Step != "pause" {
			t.Fatalf("%s, outbox %+v; want one message delayed 90s", st.Status, st.Outbox)
		}
	})
	t.Run("until in the past", func(t *testing.T) {
		p, st := start(t, "saga: s\ninput: {at: timestamp}\nsteps:\n  - {id: pause, wait: {until: \"${input.at}\"}}\n  - {id: go, action: a}\n",
			map[string]any{"at": "2020-01-01T00:00:00Z"})
		if call, err := p.Call(st, t0); err != nil || call.Step != "go" || st.Status != durable.StatusRunning {
			t.Fatalf("%s, %+v %v; want go pending at once", st.Status, call, err)
		}
	})
	t.Run("deadline first", func(t *testing.T) {
		p, st := start(t, "saga: s\ntimeout: 2h\nsteps:\n  - {id: first, action: a, compensate: {action: undo}}\n  - {id: pause, wait: {until: \"${timestamp('2027-06-01T00:00:00Z')}\"}}\n  - {id: go, action: a}\n", nil)
		if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if !st.WakeAt().Equal(t0.Add(2 * time.Hour)) {
			t.Fatalf("wake %s, want the deadline %s", st.WakeAt(), t0.Add(2*time.Hour))
		}
		if err := p.Advance(st, saga.Event{Kind: saga.EventTimer, Now: t0.Add(2 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if st.Status != durable.StatusCompensating || st.Failure == nil || st.Failure.Type != lang.ErrorTypeDeadline || st.Failure.Step != "pause" {
			t.Fatalf("%s %+v; want compensating on the deadline", st.Status, st.Failure)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		p, st := start(t, "saga: s\nsteps:\n  - {id: first, action: a, compensate: {action: undo}}\n  - {id: pause, wait: {for: 240h}}\n", nil)
		if err := p.Advance(st, saga.Event{Kind: saga.EventResult, Now: t0}); err != nil {
			t.Fatal(err)
		}
		if err := p.Advance(st, saga.Event{Kind: saga.EventCancel, Now: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if call, err := p.Call(st, t0); err != nil || !call.Compensation || call.Step != "first" || st.Status != durable.StatusCompensating || !st.WakeAt().IsZero() {
			t.Fatalf("%s %+v %v, wake %s; want first's compensation pending at once", st.Status, call, err, st.WakeAt())
		}
	})
}

// Validation of wait steps.
func TestWaitValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ src, want string }{
		{"  - {id: w, wait: {for: 1h, until: \"${timestamp('2030-01-01T00:00:00Z')}\"}}\n", "has both for: and until:"},
		{"  - {id: w, wait: {}}\n", "missing: give for: DURATION"},
		{"  - {id: w, wait: {for: 9000h}}\n", "longer than the limit of"},
		{"  - {id: w, wait: {for: -1s}}\n", "not a positive duration"},
		{"  - {id: w, wait: {until: \"${1 + 2}\"}}\n", "until must be a timestamp"},
		{"  - {id: w, wait: {until: \"\"}}\n", "until: is a CEL expression that yields a timestamp"},
		{"  - {id: w, wait: {for: 1h}, out: x}\n", "only action steps have out"},
		{"  - {id: w, wait: {for: 1h}, catch: [{errors: [Timeout], next: w}]}\n", "only action, assert and await steps"},
	} {
		_, err := saga.Compile("w.yaml", []byte("saga: s\nsteps:\n"+c.src), saga.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", strings.TrimSpace(c.src), err, c.want)
		}
	}
	// Longer than the saga's timeout: it would compensate first.
	if _, err := saga.Compile("w.yaml", []byte("saga: s\ntimeout: 1h\nsteps:\n  - {id: w, wait: {for: 2h}}\n"), saga.Options{}); err == nil || !strings.Contains(err.Error(), "is not shorter than the saga's timeout") {
		t.Errorf("a wait past the timeout: %v", err)
	}
	// A loop whose only pause is a wait is a loop that takes time: valid.
	src := "saga: s\nsteps:\n  - {id: poll, wait: {for: 1m}}\n  - {id: check, switch: [{if: \"vars.size() > 3\", next: done}, {default: poll}]}\n  - {id: done, succeed: {}}\n"
	if _, err := saga.Compile("w.yaml", []byte(src), saga.Options{}); err != nil {
		t.Errorf("a loop through a wait: %v", err)
	}
}

// A transition replayed to measure its state (Event.StoreLimit) that ends
// at a wait measures the timer too: a state the timer pushes past the
// limit compensates with StateTooLarge, rather than waiting in a state
// that cannot be stored. (The simulation found a saga left running when
// a catch routed it to a wait 5 bytes past the limit.)
func TestWaitMeasuredAgainstTheStoreLimit(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, "saga: s\nsteps:\n  - {id: first, action: a, out: o, compensate: {action: undo}}\n  - {id: pause, wait: {for: 1h}}\n")
	before := &saga.State{}
	if err := p.Advance(before, saga.Event{Kind: saga.EventStart, Now: t0, SagaID: "w-1"}); err != nil {
		t.Fatal(err)
	}
	b, _ := before.MarshalBinary()
	result := saga.Event{Kind: saga.EventResult, Now: t0, Output: map[string]any{"v": "x"}}
	var free saga.State
	_ = free.UnmarshalBinary(b)
	if err := p.Advance(&free, result); err != nil || free.Status != durable.StatusWaiting {
		t.Fatalf("without a limit: %s %v", free.Status, err)
	}
	waiting, _ := free.MarshalBinary()
	var tight saga.State
	_ = tight.UnmarshalBinary(b)
	result.StoreLimit = len(waiting) - 1
	if err := p.Advance(&tight, result); err != nil {
		t.Fatal(err)
	}
	if tight.Status != durable.StatusCompensating || tight.Failure == nil || tight.Failure.Type != lang.ErrorTypeStateTooLarge {
		t.Fatalf("a limit the timer passes: %s %+v; want compensating with StateTooLarge", tight.Status, tight.Failure)
	}
}
