package sqshandler_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/order"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/internal/sqshandler"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
)

// deadLetters keeps what the start queue's handler refuses.
type deadLetters struct{ bodies []string }

func (d *deadLetters) DeadLetter(_ context.Context, l *startqueue.DeadLetter) error {
	d.bodies = append(d.bodies, string(l.Body))
	return nil
}

// Each record of a batch goes where its own queue says: a start queue
// request to the start queue's handler, a saga's message to the saga's
// path, whichever comes first. An event source mapping's batch comes
// from one queue, but a batch put together otherwise (a test event, a
// replay, a poller of two queues) must not dead-letter a saga's message
// as a malformed request, nor fail a request as a malformed message.
func TestStartQueueRecordsAreKnownOneByOne(t *testing.T) {
	r := newRig(t, nil)
	plan, err := saga.Compile("order.yaml", order.Definition, saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.coord.Deploy(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	dead := &deadLetters{}
	sq, err := startqueue.New(startqueue.Config{Sagas: r.coord, DeadLetters: dead})
	if err != nil {
		t.Fatal(err)
	}
	h, err := sqshandler.New(sqshandler.Config{Coordinator: r.coord, Margin: time.Second, Start: sq, StartQueue: "lambdasaga-start"})
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(fixture(t, "advance.json"), &ev); err != nil {
		t.Fatal(err)
	}
	sagaRec := ev.Records[0]
	in, _ := json.Marshal(orderInput("order-2002"))
	startRec := events.SQSMessage{MessageId: "22222222-2222-4222-8222-222222222222", Body: `{"start": {"saga": "order", "id": "order-2002", "input": ` + string(in) + `}}`,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:lambdasaga-start"}
	for _, recs := range [][]events.SQSMessage{{startRec, sagaRec}, {sagaRec, startRec}} {
		b, _ := json.Marshal(events.SQSEvent{Records: recs})
		if failed := invokeBatch(t, context.Background(), lambda.NewHandler(h.Handle), b); len(failed) != 0 {
			t.Fatalf("records %s and %s: failed %v", recs[0].MessageId, recs[1].MessageId, failed)
		}
		if len(dead.bodies) != 0 {
			t.Fatalf("dead-lettered: %q", dead.bodies)
		}
	}
	if st := r.state(t); st.Version < 2 {
		t.Fatalf("order-1001 at version %d: its message was not handled", st.Version)
	}
	st, err := r.coord.Get(context.Background(), "order-2002")
	if err != nil || st.Status != durable.StatusRunning {
		t.Fatalf("order-2002: %v %v", st, err)
	}
}
