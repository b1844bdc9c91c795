package engine_test

import (
	"fmt"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
)

// Crash windows of a fork. An injected error stands for a crash at that
// point: the handler returns it, the message comes back, and redelivery
// alone must finish the saga with each effect applied once.

const shipYAML = `saga: ship
input: {items: list}
steps:
  - {id: open, action: orders.open, with: {arg: open}, compensate: {action: orders.close, with: {arg: close}}}
  - id: each
    foreach: "${input.items}"
    concurrency: CONC
    steps:
      - {id: send, action: shipping.send, with: {arg: "${item}"}, out: parcel, compensate: {action: shipping.recall, with: {arg: "${item}"}}}
    out: parcels
  - {id: last, action: last.do, with: {arg: last}}
`

func shipRig(t *testing.T, conc, n int) (*frig, map[string]any) {
	src := replaceOnce(shipYAML, "CONC", fmt.Sprint(conc))
	r := newFrig(t, src, nil)
	items := []any{}
	for i := range n {
		items = append(items, fmt.Sprintf("s%02d", i))
	}
	return r, map[string]any{"items": items}
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	return s
}

// checkShipped: the saga ended as want, each item shipped once, and (when
// it compensated) recalled once.
func checkShipped(t *testing.T, r *frig, in map[string]any, want durable.Status) {
	t.Helper()
	st := r.get("p")
	log := r.effects()
	if st.Status != want {
		t.Fatalf("parent %s %+v, want %s; effects %v; handle errors:\n%s", st.Status, st.Failure, want, log, firstLines(r.handleErrors(), 4))
	}
	for _, it := range in["items"].([]any) {
		sent := countOf(log, fmt.Sprintf("shipping.send(%v)", it))
		if sent != 1 && (want == durable.StatusSucceeded || sent > 1) {
			t.Errorf("%v shipped %d times", it, sent)
		}
		if want == durable.StatusCompensated && countOf(log, fmt.Sprintf("shipping.recall(%v)", it)) != sent {
			t.Errorf("%v shipped %d, recalled %d times", it, sent, countOf(log, fmt.Sprintf("shipping.recall(%v)", it)))
		}
	}
}

// Each window fails once; redelivery alone (no sweep) must finish the saga.
func TestForkCrashWindowsRecoverOnRedelivery(t *testing.T) {
	cases := []struct {
		name  string
		store func(op, key string) bool
		queue func(m durable.Message) bool
	}{
		{name: "child create", store: func(op, key string) bool { return op == "create" && key != "p" }},
		{name: "child's first send", queue: func(m durable.Message) bool { return m.SagaID != "p" && m.Step == "send" && m.Kind == "" }},
		{name: "count", store: func(op, key string) bool { return op == "forkcount" }},
		{name: "successor create", store: func(op, key string) bool { return op == "create" && key == durable.ChildID("p", "each", 2, 3) }},
		{name: "ended send", queue: func(m durable.Message) bool { return m.Kind == durable.KindEnded }},
		{name: "join send", queue: func(m durable.Message) bool { return m.Kind == durable.KindJoin }},
		{name: "join read", store: func(op, key string) bool { return op == "forkget" }},
		{name: "parent's join write", store: func(op, key string) bool { return op == "update" && key == "p" }},
	}
	for _, tc := range cases {
		for _, conc := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/concurrency %d", tc.name, conc), func(t *testing.T) {
				r, in := shipRig(t, conc, 5)
				r.start("p", in)
				r.drainUntil(func() bool { return r.get("p").Status == durable.StatusWaiting }) // open runs: the parent forks
				fails := 1
				if tc.store != nil {
					r.store.setHook(func(op, key string) error {
						if fails > 0 && tc.store(op, key) {
							fails--
							return errInjected
						}
						return nil
					})
				}
				if tc.queue != nil {
					r.queue.setHook(func(m durable.Message) (bool, error) {
						if fails > 0 && tc.queue(m) {
							fails--
							return false, errInjected
						}
						return false, nil
					})
				}
				r.drain()
				if fails > 0 {
					t.Fatalf("the window was never reached")
				}
				checkShipped(t, r, in, durable.StatusSucceeded)
			})
		}
	}
}

// The same windows while the fork fails and its children are undone.
func TestFailedForkCrashWindowsRecoverOnRedelivery(t *testing.T) {
	cases := []struct {
		name  string
		store func(op, key string) bool
		queue func(m durable.Message) bool
	}{
		{name: "undo send", queue: func(m durable.Message) bool { return m.Kind == durable.KindUndo }},
		{name: "undone child's ended send", queue: func(m durable.Message) bool { return m.Kind == durable.KindEnded && m.Queue == durable.QueueAdvance }},
		{name: "recall send", queue: func(m durable.Message) bool {
			return m.Step == "send" && m.Queue == durable.QueueCompensate && m.Kind == ""
		}},
		{name: "stop's ForkStop", store: func(op, key string) bool { return op == "forkstop" }},
		{name: "cancel of a lane's child", store: func(op, key string) bool { return op == "update" && key != "p" }},
		{name: "parent's next undo send", queue: func(m durable.Message) bool {
			return m.Kind == durable.KindUndo && m.SagaID == durable.ChildID("p", "each", 2, 0)
		}},
	}
	for _, tc := range cases {
		for _, conc := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/concurrency %d", tc.name, conc), func(t *testing.T) {
				r, in := shipRig(t, conc, 6)
				r.fail["shipping.send(s04)"] = true
				r.start("p", in)
				fails := 1
				if tc.store != nil {
					r.store.setHook(func(op, key string) error {
						if fails > 0 && tc.store(op, key) {
							fails--
							return errInjected
						}
						return nil
					})
				}
				if tc.queue != nil {
					r.queue.setHook(func(m durable.Message) (bool, error) {
						if fails > 0 && tc.queue(m) {
							fails--
							return false, errInjected
						}
						return false, nil
					})
				}
				r.drain()
				if fails > 0 {
					t.Skip("the window was not reached in this run")
				}
				checkShipped(t, r, in, durable.StatusCompensated)
			})
		}
	}
}

// Every message is delivered twice: the fork's counts, joins, undos and
// launches are idempotent; each item ships once and is recalled once.
func TestForkUnderDuplicateDeliveryShipsAndRecallsOnce(t *testing.T) {
	for _, fail := range []bool{false, true} {
		for _, conc := range []int{1, 3} {
			t.Run(fmt.Sprintf("fail %v concurrency %d", fail, conc), func(t *testing.T) {
				r, in := shipRig(t, conc, 7)
				want := durable.StatusSucceeded
				if fail {
					r.fail["shipping.send(s04)"] = true
					want = durable.StatusCompensated
				}
				r.queue.dup = true
				r.start("p", in)
				r.drain()
				checkShipped(t, r, in, want)
			})
		}
	}
}
