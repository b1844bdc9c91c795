package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A damaged stored state is an error of its message, never a panic of
// the worker.

func TestDamagedStateIsAnErrorNotAPanic(t *testing.T) {
	t.Parallel()
	e := newEdgeRig(t, bigOutputSaga, nil)
	st := e.start("s-1", map[string]any{"blob": "b"})
	d, _ := e.receive()
	damaged := *st
	damaged.Cursors = []saga.Cursor{{Step: 99, Attempt: 1, Seq: 1}}
	b, err := damaged.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	rec := durable.SagaRecord{SagaID: "s-1", Version: st.Version + 0, Status: st.Status, Name: st.Name, DefinitionHash: st.DefinitionHash, State: b}
	damaged.Version++
	if b, err = damaged.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	rec.State, rec.Version = b, damaged.Version
	if err := e.store.SagaUpdate(context.Background(), &durable.SagaUpdateParams{Record: rec, ExpectedVersion: st.Version}); err != nil {
		t.Fatal(err)
	}
	var msg durable.Message
	if msg, err = durable.DecodeMessage(d.Body); err != nil {
		t.Fatal(err)
	}
	msg.Version = damaged.Version
	body := durable.AppendMessage(nil, msg)
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Handle panicked on a damaged state: %v", r)
			}
		}()
		_, err = e.coord.Handle(context.Background(), body)
	}()
	if !errors.Is(err, engine.ErrDamagedState) {
		t.Fatalf("err %v, want ErrDamagedState", err)
	}
}

func TestStateWithoutVarsIsHandled(t *testing.T) {
	t.Parallel()
	e := newEdgeRig(t, bigOutputSaga, nil)
	st := e.start("s-1", map[string]any{"blob": "b"})
	d, _ := e.receive()
	damaged := *st
	damaged.Vars, damaged.Input = nil, nil
	damaged.Version++
	b, err := damaged.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	rec := durable.SagaRecord{SagaID: "s-1", Version: damaged.Version, Status: st.Status, Name: st.Name, DefinitionHash: st.DefinitionHash, State: b}
	if err := e.store.SagaUpdate(context.Background(), &durable.SagaUpdateParams{Record: rec, ExpectedVersion: st.Version}); err != nil {
		t.Fatal(err)
	}
	msg, _ := durable.DecodeMessage(d.Body)
	msg.Version = damaged.Version
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Handle panicked on a state without vars: %v", r)
			}
		}()
		_, _ = e.coord.Handle(context.Background(), durable.AppendMessage(nil, msg))
	}()
}
