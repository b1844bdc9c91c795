package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/schedule"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
)

// TestDuplicatedDeliveryStartsOnce: EventBridge Scheduler delivers a
// firing at least once. Each delivery of the request Request renders,
// as Scheduler substitutes it, goes through the start queue's handler to
// the coordinator, which starts the deployed saga by name: the repeat
// finds the saga its id names and runs nothing; another firing runs
// another saga; the same id with another input is refused
// (dead-lettered), not run.
func TestDuplicatedDeliveryStartsOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string]int{} // idempotency key -> calls
	actions := engine.NewRegistry()
	actions.SetFallback(func(ctx context.Context, call saga.Call) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[call.IdempotencyKey]++
		return map[string]any{}, nil
	})
	rt, err := embedded.Start(embedded.Config{Actions: actions, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	plan, err := saga.Compile("report.yaml", []byte("saga: report\ninput: {region: string}\nsteps:\n  - id: build\n    action: report.build\n"), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rt.Coordinator.Deploy(ctx, plan); err != nil {
		t.Fatal(err)
	}
	dead := &deadLetters{}
	h, err := startqueue.New(startqueue.Config{Sagas: rt.Coordinator, DeadLetters: dead})
	if err != nil {
		t.Fatal(err)
	}
	input, err := schedule.Request("report", "report-", json.RawMessage(`{"region": "eu"}`))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := schedule.Request("report", "report-", json.RawMessage(`{"region": "us"}`))
	monday := time.Date(2027, 1, 4, 8, 0, 0, 0, time.UTC)
	for i, d := range []struct {
		request string
		at      time.Time
		want    startqueue.Verdict
	}{
		{input, monday, startqueue.Done},
		{input, monday, startqueue.Done}, // Scheduler's retry, or SQS's second delivery
		{input, monday.AddDate(0, 0, 1), startqueue.Done},
		{input, monday, startqueue.Done},
		{other, monday, startqueue.Refused},
	} {
		out := h.Handle(ctx, startqueue.Message{ID: fmt.Sprint("m", i), Body: []byte(deliver(d.request, d.at)), ReceiveCount: 1})
		if out.Verdict != d.want {
			t.Fatalf("delivery %d (%s): verdict %v (%v), want %v", i, out.SagaID, out.Verdict, out.Err, d.want)
		}
		if d.want == startqueue.Done {
			if st, err := rt.Wait(ctx, out.SagaID); err != nil || st.Status != durable.StatusSucceeded {
				t.Fatalf("%s: %v, %v", out.SagaID, st, err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"report-2027-01-04T08:00:00Z/build/1": 1, "report-2027-01-05T08:00:00Z/build/1": 1}
	if len(calls) != len(want) || calls["report-2027-01-04T08:00:00Z/build/1"] != 1 || calls["report-2027-01-05T08:00:00Z/build/1"] != 1 {
		t.Errorf("action calls %v, want %v", calls, want)
	}
	if len(dead.letters) != 1 || dead.letters[0].SagaID != "report-2027-01-04T08:00:00Z" {
		t.Errorf("dead letters %+v, want the start with another input", dead.letters)
	}
}

// deadLetters keeps what the handler refuses.
type deadLetters struct {
	mu      sync.Mutex
	letters []*startqueue.DeadLetter
}

func (d *deadLetters) DeadLetter(_ context.Context, l *startqueue.DeadLetter) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.letters = append(d.letters, l)
	return nil
}
