package sim

import (
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
)

// A dead letter that is not poison is reported with what it was and what
// each of its receipts ended with; the poison injected is left out.
func TestDeadLetterReasons(t *testing.T) {
	w := &world{}
	w.queue = newSimQueue(w)
	poison := []byte(`{"v":1,"saga_id":"poison-0","version":`)
	w.queue.poison = [][]byte{poison}
	ended := durable.AppendMessage(nil, durable.Message{SagaID: "s1.f2.2.6", Version: 3, Queue: durable.QueueAdvance, Kind: durable.KindEnded, Step: "f2", Attempt: 1})
	step := durable.AppendMessage(nil, durable.Message{SagaID: "s1", Version: 1, Queue: durable.QueueAdvance, Step: "a1", Attempt: 2})
	w.queue.dead = []*delivery{
		{body: poison, errs: []string{"malformed", "malformed"}},
		{body: ended, errs: []string{"throttled", "throttled", "simulated crash", "ok", "throttled"}},
		{body: step, errs: []string{"cancel s1.f2.2.0: re-send: throttled"}},
	}
	got := w.deadLetterReasons()
	for _, want := range []string{
		"s1.f2.2.6 v3 ended (advance, attempt 1): [2 x throttled | simulated crash | ok | throttled]",
		"s1 v1 step a1 (advance, attempt 2): [cancel s1.f2.2.0: re-send: throttled]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("reasons lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "poison") || strings.Contains(got, "malformed") {
		t.Errorf("reasons name the poison injected:\n%s", got)
	}
}
