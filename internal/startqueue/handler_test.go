package startqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// fakeSagas answers each call with err, and records the calls.
type fakeSagas struct {
	err   error
	calls []string
}

func (f *fakeSagas) Start(_ context.Context, p *engine.StartParams) (*saga.State, error) {
	f.calls = append(f.calls, fmt.Sprintf("start %s %s %v", p.Name, p.SagaID, p.Input))
	return &saga.State{SagaID: p.SagaID}, f.err
}

func (f *fakeSagas) SignalWithStart(_ context.Context, p *engine.SignalWithStartParams) (*engine.SignalWithStartResult, error) {
	f.calls = append(f.calls, fmt.Sprintf("signal-with-start %s %s %v %s %s", p.Start.Name, p.Signal.SagaID, p.Start.Input, p.Signal.Name, p.Signal.ID))
	d, err := f.delivered()
	return &engine.SignalWithStartResult{Started: err == nil, Delivered: d}, err
}

func (f *fakeSagas) Signal(_ context.Context, p *engine.SignalParams) (*engine.Delivered, error) {
	f.calls = append(f.calls, fmt.Sprintf("signal %s %s %s %s", p.SagaID, p.Name, p.ID, p.Payload))
	return f.delivered()
}

func (f *fakeSagas) CompleteCallback(_ context.Context, token string, output any) (*engine.Delivered, error) {
	f.calls = append(f.calls, fmt.Sprintf("complete %s %s", token, output))
	return f.delivered()
}

func (f *fakeSagas) FailCallback(_ context.Context, token, typ, msg string) (*engine.Delivered, error) {
	f.calls = append(f.calls, fmt.Sprintf("fail %s %s %s", token, typ, msg))
	return f.delivered()
}

func (f *fakeSagas) delivered() (*engine.Delivered, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &engine.Delivered{Receipt: saga.ReceiptApplied}, nil
}

// deadLetterBox keeps dead letters, or fails to take them with err.
type deadLetterBox struct {
	err     error
	letters []*DeadLetter
}

func (b *deadLetterBox) DeadLetter(_ context.Context, l *DeadLetter) error {
	if b.err != nil {
		return b.err
	}
	b.letters = append(b.letters, l)
	return nil
}

func TestHandleCarriesOutEachKind(t *testing.T) {
	for _, tc := range []struct{ body, call string }{
		{`{"start": {"saga": "order", "id": "o-1", "input": {"n": 2}}}`, "start order o-1 map[n:2]"},
		{`{"start": {"saga": "order", "id": "o-1"}}`, "start order o-1 map[]"},
		{`{"signal": {"id": "o-1", "name": "go", "payload": {"a": 1}, "delivery": "d-1"}}`, `signal o-1 go d-1 {"a": 1}`},
		{`{"signal": {"id": "o-1", "name": "go"}}`, "signal o-1 go sqs:m-1 %!s(<nil>)"},
		{`{"start": {"saga": "exp", "id": "c-1"}, "signal": {"name": "go"}}`, "signal-with-start exp c-1 map[] go sqs:m-1"},
		{`{"callback": {"token": "t", "output": [1]}}`, "complete t [1]"},
		{`{"callback": {"token": "t", "error": {"type": "No", "message": "m"}}}`, "fail t No m"},
	} {
		f, box := &fakeSagas{}, &deadLetterBox{}
		h, err := New(Config{Sagas: f, DeadLetters: box})
		if err != nil {
			t.Fatal(err)
		}
		out := h.Handle(context.Background(), Message{ID: "m-1", Body: []byte(tc.body), ReceiveCount: 1})
		if out.Verdict != Done || out.Err != nil {
			t.Errorf("%s: %v %v", tc.body, out.Verdict, out.Err)
		}
		if len(f.calls) != 1 || f.calls[0] != tc.call {
			t.Errorf("%s: calls %q, want %q", tc.body, f.calls, tc.call)
		}
		if len(box.letters) != 0 {
			t.Errorf("%s: dead-lettered", tc.body)
		}
	}
}

func TestHandleJudgesErrors(t *testing.T) {
	start := `{"start": {"saga": "order", "id": "o-1"}}`
	signal := `{"signal": {"id": "o-1", "name": "go"}}`
	for _, tc := range []struct {
		name, body   string
		err          error
		receiveCount int
		want         Verdict
	}{
		{"unknown saga name", start, fmt.Errorf("saga order: %w", durable.ErrNotFound), 1, Refused},
		{"existing id, other input", start, fmt.Errorf("start o-1: %w with a different definition or input", durable.ErrExists), 1, Refused},
		{"input refused", start, fmt.Errorf("%w: input.n: missing", saga.ErrInvalidInput), 1, Refused},
		{"throttled", start, fmt.Errorf("put: %w", durable.ErrThrottled), 1, Retry},
		{"store down", start, errors.New("connection refused"), 4, Retry},
		{"signal before its saga", signal, fmt.Errorf("saga o-1: %w", durable.ErrNotFound), 1, Retry},
		{"signal before its saga, second delivery", signal, fmt.Errorf("saga o-1: %w", durable.ErrNotFound), 2, Retry},
		{"signal for no saga", signal, fmt.Errorf("saga o-1: %w", durable.ErrNotFound), DefaultMissingRetries, Refused},
		{"signal the saga cannot take", signal, fmt.Errorf("signal go: %w", saga.ErrNotReceiving), 1, Refused},
		{"malformed", `{"start": {}}`, nil, 1, Refused},
		// A refusal's sentinel beside a transient cause: the cause may be
		// why, and a retry costs a delivery where a refusal drops the start.
		{"not found, and throttled", start, errors.Join(fmt.Errorf("saga order: %w", durable.ErrNotFound), durable.ErrThrottled), 1, Retry},
		{"input refused, and out of time", start, fmt.Errorf("%w: %w", saga.ErrInvalidInput, context.DeadlineExceeded), 1, Retry},
		{"exists, and cancelled", start, fmt.Errorf("%w (%w)", durable.ErrExists, context.Canceled), 1, Retry},
		{"not receiving, and a conflict", signal, fmt.Errorf("%w: %w", saga.ErrNotReceiving, durable.ErrConflict), 1, Retry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, box := &fakeSagas{err: tc.err}, &deadLetterBox{}
			h, err := New(Config{Sagas: f, DeadLetters: box})
			if err != nil {
				t.Fatal(err)
			}
			out := h.Handle(context.Background(), Message{ID: "m-1", Body: []byte(tc.body), ReceiveCount: tc.receiveCount})
			if out.Verdict != tc.want {
				t.Fatalf("verdict %v (%v), want %v", out.Verdict, out.Err, tc.want)
			}
			if got := len(box.letters); (got == 1) != (tc.want == Refused) || got > 1 {
				t.Fatalf("%d dead letters for verdict %v", got, out.Verdict)
			}
			if tc.want == Refused {
				l := box.letters[0]
				if string(l.Body) != tc.body || l.MessageID != "m-1" || l.Reason != out.Err.Error() {
					t.Errorf("dead letter %+v", l)
				}
			}
		})
	}
}

// TestHandleNeverDropsARefusal: when the dead-letter queue does not take
// a refused request, it is retried rather than deleted.
func TestHandleNeverDropsARefusal(t *testing.T) {
	h, err := New(Config{Sagas: &fakeSagas{err: durable.ErrExists}, DeadLetters: &deadLetterBox{err: errors.New("queue gone")}})
	if err != nil {
		t.Fatal(err)
	}
	out := h.Handle(context.Background(), Message{ID: "m-1", Body: []byte(`{"start": {"saga": "order", "id": "o-1"}}`), ReceiveCount: 1})
	if out.Verdict != Retry || !strings.Contains(out.Err.Error(), "already exists") {
		t.Fatalf("verdict %v (%v), want retry", out.Verdict, out.Err)
	}
}

// panicSagas panics on every call, as a bug in the engine or an
// expression would.
type panicSagas struct{ fakeSagas }

func (p *panicSagas) Start(context.Context, *engine.StartParams) (*saga.State, error) {
	panic("boom")
}

// TestHandleSurvivesAPanic: a request that panics is retried (it comes
// back, and the redrive policy moves it after MaxReceiveCount), and the
// panic does not take the batch down with it: the other requests of the
// batch are carried out, their receive counts untouched.
func TestHandleSurvivesAPanic(t *testing.T) {
	h, err := New(Config{Sagas: &panicSagas{}, DeadLetters: &deadLetterBox{}})
	if err != nil {
		t.Fatal(err)
	}
	out := h.Handle(context.Background(), Message{ID: "m-1", Body: []byte(`{"start": {"saga": "order", "id": "o-1"}}`), ReceiveCount: 1})
	if out.Verdict != Retry || out.Err == nil || !strings.Contains(out.Err.Error(), "panic") || out.SagaID != "o-1" {
		t.Fatalf("outcome %+v, want retry naming the panic", out)
	}
	if out := h.Handle(context.Background(), Message{ID: "m-2", Body: []byte(`{"signal": {"id": "o-1", "name": "go"}}`), ReceiveCount: 1}); out.Verdict != Done {
		t.Fatalf("the next request: %+v", out)
	}
}
