package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// A message whose version is 2^64-1 was taken as a stale duplicate (the
// coordinator adds one to it, which wrapped to 0) and deleted; it is
// malformed, so it fails and reaches the dead-letter queue.
func TestHandleRefusesImpossibleVersion(t *testing.T) {
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	r.start("o-1", orderIn(10))
	body := durable.AppendMessage(nil, durable.Message{SagaID: "o-1", Version: 1<<64 - 1, Queue: durable.QueueAdvance, Step: "reserve", Attempt: 1})
	outcome, err := r.coord.Handle(context.Background(), body)
	if !errors.Is(err, durable.ErrMalformedMessage) {
		t.Fatalf("outcome %q, err %v: want ErrMalformedMessage", outcome, err)
	}
	if st := r.get("o-1"); st.Version != 1 {
		t.Fatalf("saga moved to v%d", st.Version)
	}
}

// A fork's message is not a step's: one that could never have been sent
// to this saga (ended or undo of a saga that is no child, a launch, which
// is never queued) is malformed; a join or a stop of a saga that waits on
// no fork is stale. None changes the saga or runs its action.
func TestHandleRefusesForkMessagesThatAreNotOurs(t *testing.T) {
	r := newRig(t, "../saga/testdata/valid/order.yaml")
	r.start("o-1", orderIn(10))
	for _, kind := range []durable.MessageKind{durable.KindEnded, durable.KindUndo, durable.KindLaunch} {
		body := durable.AppendMessage(nil, durable.Message{SagaID: "o-1", Version: 1, Queue: durable.QueueAdvance, Step: "reserve", Attempt: 1, Kind: kind})
		outcome, err := r.coord.Handle(context.Background(), body)
		if !errors.Is(err, durable.ErrMalformedMessage) {
			t.Fatalf("%s: outcome %q, err %v: want ErrMalformedMessage", kind, outcome, err)
		}
	}
	for _, kind := range []durable.MessageKind{durable.KindJoin, durable.KindStop} {
		body := durable.AppendMessage(nil, durable.Message{SagaID: "o-1", Version: 1, Queue: durable.QueueAdvance, Step: "reserve", Attempt: 1, Kind: kind})
		if outcome, err := r.coord.Handle(context.Background(), body); err != nil || outcome != engine.HandledStale {
			t.Fatalf("%s: outcome %q, err %v: want stale", kind, outcome, err)
		}
	}
	if st := r.get("o-1"); st.Version != 1 {
		t.Fatalf("saga moved to v%d", st.Version)
	}
}
