package saga_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func traced() saga.TraceContext {
	var tc saga.TraceContext
	for i := range tc.TraceID {
		tc.TraceID[i] = byte(i + 1)
	}
	for i := range tc.SpanID {
		tc.SpanID[i] = byte(0xa0 + i)
	}
	tc.Flags = 1
	return tc
}

func TestStateTraceRoundTrips(t *testing.T) {
	t.Parallel()
	st := richState()
	st.Trace = traced()
	b, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got saga.State
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if got.Trace != st.Trace {
		t.Errorf("trace context: got %+v, want %+v", got.Trace, st.Trace)
	}
	untraced, _ := richState().MarshalBinary()
	if len(b) != len(untraced)+2+1+25 {
		t.Errorf("a trace context costs %d bytes; want 28 (a key of two bytes, the length, 25)", len(b)-len(untraced))
	}
}

func TestStateWithoutTraceEncodesAsBefore(t *testing.T) {
	t.Parallel()
	b, err := richState().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	key := binary.AppendUvarint(nil, 36<<3|1)
	if bytes.Contains(b, append(key, 25)) {
		t.Error("a state with no trace context encodes one")
	}
}

func TestStateTraceOfAnotherLengthIsNone(t *testing.T) {
	t.Parallel()
	b, err := richState().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	b = binary.AppendUvarint(b, 36<<3|1)
	b = append(b, 3, 1, 2, 3) // a later, longer or shorter, form
	var got saga.State
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !got.Trace.IsZero() {
		t.Errorf("trace context of 3 bytes read as %+v", got.Trace)
	}
	if got.SagaID != richState().SagaID {
		t.Error("fields before it lost")
	}
}
