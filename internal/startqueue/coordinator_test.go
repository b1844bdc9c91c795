package startqueue_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memobjects"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sagatest"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
)

// approval awaits a signal, then succeeds with what it said.
const approval = `
saga: approval
input: {claim: string}
steps:
  - id: ask
    action: claims.ask
    with: {claim: "${input.claim}"}
  - id: decide
    await: {signal: approved, timeout: 1h}
    out: decision
  - id: done
    succeed: {output: "${vars.decision}"}
`

// deadLetters keeps what a handler refuses.
type deadLetters struct{ letters []*startqueue.DeadLetter }

func (d *deadLetters) DeadLetter(_ context.Context, l *startqueue.DeadLetter) error {
	d.letters = append(d.letters, l)
	return nil
}

// rig is an embedded runtime with approval deployed, and a start queue
// handler on its coordinator.
type rig struct {
	rt   *embedded.Runtime
	h    *startqueue.Handler
	dead *deadLetters
	n    int
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigWith(t, embedded.Config{})
}

// newRigWith is newRig on a runtime configured so (its Actions set here).
func newRigWith(t *testing.T, cfg embedded.Config) *rig {
	t.Helper()
	reg := engine.NewRegistry()
	reg.MustRegister("claims.ask", func(_ context.Context, c saga.Call) (any, error) { return c.Input, nil })
	cfg.Actions = reg
	rt, err := embedded.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	if _, err := rt.Coordinator.Deploy(context.Background(), sagatest.MustCompile(t, approval)); err != nil {
		t.Fatal(err)
	}
	dead := &deadLetters{}
	h, err := startqueue.New(startqueue.Config{Sagas: rt.Coordinator, DeadLetters: dead})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{rt: rt, h: h, dead: dead}
}

// send hands the handler a message of body, a new one each time.
func (r *rig) send(body string) startqueue.Outcome {
	r.n++
	return r.h.Handle(context.Background(), startqueue.Message{ID: "m-" + strconv.Itoa(r.n), Body: []byte(body), ReceiveCount: 1})
}

func (r *rig) wait(t *testing.T, id string) *saga.State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := r.rt.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestStartSignalThroughTheQueue(t *testing.T) {
	r := newRig(t)
	if o := r.send(`{"start": {"saga": "approval", "id": "c-1", "input": {"claim": "taxi"}}}`); o.Verdict != startqueue.Done {
		t.Fatalf("start: %v %v", o.Verdict, o.Err)
	}
	// A second delivery, or a sender's retry: the same saga.
	if o := r.send(`{"start": {"saga": "approval", "id": "c-1", "input": {"claim": "taxi"}}}`); o.Verdict != startqueue.Done {
		t.Fatalf("repeated start: %v %v", o.Verdict, o.Err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.rt.WaitReceiving(ctx, "c-1"); err != nil {
		t.Fatal(err)
	}
	o := r.send(`{"signal": {"id": "c-1", "name": "approved", "payload": {"by": "maria"}, "delivery": "d-1"}}`)
	if o.Verdict != startqueue.Done || o.Receipt != saga.ReceiptApplied {
		t.Fatalf("signal: %v %v %v", o.Verdict, o.Receipt, o.Err)
	}
	if o := r.send(`{"signal": {"id": "c-1", "name": "approved", "payload": {"by": "maria"}, "delivery": "d-1"}}`); o.Receipt != saga.ReceiptDuplicate {
		t.Fatalf("repeated signal: %v %v %v", o.Verdict, o.Receipt, o.Err)
	}
	st := r.wait(t, "c-1")
	if st.Status != durable.StatusSucceeded || st.Output.(map[string]any)["by"] != "maria" {
		t.Fatalf("saga %s, output %v", st.Status, st.Output)
	}
	if len(r.dead.letters) != 0 {
		t.Fatalf("dead letters: %+v", r.dead.letters[0])
	}
}

func TestSignalWithStartThroughTheQueue(t *testing.T) {
	r := newRig(t)
	body := `{"start": {"saga": "approval", "id": "c-2", "input": {"claim": "hotel"}}, "signal": {"name": "approved", "payload": {"by": "ana"}, "delivery": "d-2"}}`
	o := r.send(body)
	// Kept when the signal comes while ask runs, applied when ask ran
	// first (the runtime's workers race this call): both are right.
	if o.Verdict != startqueue.Done || !o.Started || (o.Receipt != saga.ReceiptKept && o.Receipt != saga.ReceiptApplied) {
		t.Fatalf("signal-with-start: %v started %v receipt %v %v", o.Verdict, o.Started, o.Receipt, o.Err)
	}
	if o := r.send(body); o.Verdict != startqueue.Done || o.Started || o.Receipt != saga.ReceiptDuplicate {
		t.Fatalf("repeated: %v started %v receipt %v %v", o.Verdict, o.Started, o.Receipt, o.Err)
	}
	if st := r.wait(t, "c-2"); st.Status != durable.StatusSucceeded || st.Output.(map[string]any)["by"] != "ana" {
		t.Fatalf("saga %s, output %v", st.Status, st.Output)
	}
}

func TestRefusedRequestsAreDeadLettered(t *testing.T) {
	r := newRig(t)
	if o := r.send(`{"start": {"saga": "approval", "id": "c-3", "input": {"claim": "taxi"}}}`); o.Verdict != startqueue.Done {
		t.Fatalf("start: %v %v", o.Verdict, o.Err)
	}
	for _, tc := range []struct{ name, body, reason string }{
		{"another input for an existing id", `{"start": {"saga": "approval", "id": "c-3", "input": {"claim": "train"}}}`, "already exists"},
		{"an unknown saga", `{"start": {"saga": "nosuch", "id": "c-4"}}`, "nosuch"},
		{"an input the definition refuses", `{"start": {"saga": "approval", "id": "c-5", "input": {"claim": 7}}}`, "claim"},
		{"an input missing a field", `{"start": {"saga": "approval", "id": "c-6", "input": {}}}`, "claim"},
		{"a token the saga did not issue", `{"callback": {"token": "not-a-token", "output": 1}}`, "token"},
		{"malformed", `{"start": {"saga": "approval"}}`, "start.id: missing"},
		{"an input past the input limit", `{"start": {"saga": "approval", "id": "c-7", "input": {"claim": "` + strings.Repeat("x", 200<<10) + `"}}}`, "input"},
		{"an input nested too deep", `{"start": {"saga": "approval", "id": "c-8", "input": {"claim": "a", "x": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}}`, "input"},
		{"a signal payload past its limit", `{"signal": {"id": "c-3", "name": "approved", "payload": "` + strings.Repeat("x", 40<<10) + `"}}`, "payload"},
		{"a number past a float64", `{"start": {"saga": "approval", "id": "c-9", "input": {"claim": "a", "n": 1e400}}}`, "start.input"},
		{"an id of nearly 1 MiB", `{"start": {"saga": "approval", "id": "` + strings.Repeat("a", 1<<20-100) + `"}}`, "start.id"},
		{"a saga name past its limit", `{"start": {"saga": "` + strings.Repeat("a", 100<<10) + `", "id": "c-11"}}`, "start.saga"},
		{"a signal name past its limit", `{"signal": {"id": "c-3", "name": "` + strings.Repeat("a", 100<<10) + `"}}`, "signal.name"},
		{"a delivery id past its limit", `{"signal": {"id": "c-3", "name": "approved", "delivery": "` + strings.Repeat("a", 100<<10) + `"}}`, "signal.delivery"},
		{"a signal-with-start of a signal never awaited", `{"start": {"saga": "approval", "id": "c-10", "input": {"claim": "a"}}, "signal": {"name": "nope"}}`, "no await of signal nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(r.dead.letters)
			o := r.send(tc.body)
			if o.Verdict != startqueue.Refused {
				t.Fatalf("verdict %v (%v)", o.Verdict, o.Err)
			}
			if len(r.dead.letters) != before+1 {
				t.Fatalf("%d dead letters, want %d", len(r.dead.letters), before+1)
			}
			l := r.dead.letters[before]
			if string(l.Body) != tc.body || !strings.Contains(l.Reason, tc.reason) {
				t.Fatalf("dead letter: body %.200s, reason %q; want a reason with %q", l.Body, l.Reason, tc.reason)
			}
			// The reason is logged and kept as an attribute: it names,
			// never quotes a value.
			if strings.Contains(l.Reason, "xxxxxxxx") || strings.Contains(l.Reason, "taxi") || strings.Contains(l.Reason, "train") || len(l.Reason) > 1024 {
				t.Fatalf("the reason quotes the request: %.300q", l.Reason)
			}
		})
	}
	// The existing saga is untouched by the refused start.
	st, err := r.rt.Coordinator.Get(context.Background(), "c-3")
	if err != nil || st.Input["claim"] != "taxi" {
		t.Fatalf("c-3: %v %v", st, err)
	}
	for _, id := range []string{"c-5", "c-10"} {
		if _, err := r.rt.Coordinator.Get(context.Background(), id); !errors.Is(err, durable.ErrNotFound) {
			t.Fatalf("%s was started: %v", id, err)
		}
	}
}

// With an object store, a request's input and payload may fill the
// message: values over the threshold go by reference.
func TestLargeValuesThroughTheQueueWithAnObjectStore(t *testing.T) {
	objects := memobjects.New()
	r := newRigWith(t, embedded.Config{Objects: objects})
	claim := strings.Repeat("c", 600<<10)
	if o := r.send(`{"start": {"saga": "approval", "id": "c-big", "input": {"claim": "` + claim + `"}}}`); o.Verdict != startqueue.Done {
		t.Fatalf("start: %v %v", o.Verdict, o.Err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.rt.WaitReceiving(ctx, "c-big"); err != nil {
		t.Fatal(err)
	}
	by := strings.Repeat("b", 200<<10)
	if o := r.send(`{"signal": {"id": "c-big", "name": "approved", "payload": {"by": "` + by + `"}}}`); o.Verdict != startqueue.Done || o.Receipt != saga.ReceiptApplied {
		t.Fatalf("signal: %v %v %v", o.Verdict, o.Receipt, o.Err)
	}
	st := r.wait(t, "c-big")
	if st.Status != durable.StatusSucceeded || st.Output.(map[string]any)["by"] != by || st.Input["claim"] != claim {
		t.Fatalf("saga %s", st.Status)
	}
	rec, err := r.rt.Store.SagaGet(context.Background(), &durable.SagaGetParams{SagaID: "c-big"})
	if err != nil || len(rec.State) > 16<<10 {
		t.Fatalf("stored state: %d bytes (%v); want references, not values", len(rec.State), err)
	}
}
