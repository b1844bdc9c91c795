package saga_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func richState() *saga.State {
	return &saga.State{
		SagaID: "s-1", Name: "order", DefinitionHash: strings.Repeat("ab", 32), Status: durable.StatusCompensating, Version: 7,
		Input: map[string]any{"order_id": "o-1", "amount": 12.5, "n": int64(-3), "u": uint64(1 << 63), "ok": true, "none": nil,
			"blob": []byte{0, 1, 2}, "at": time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), "wait": 90 * time.Second,
			"items": []any{"a", int64(2), []any{}, map[string]any{}}},
		Vars:      map[string]any{"reservation": map[string]any{"id": "r-1", "big": strings.Repeat("x", 300)}},
		Cursors:   []saga.Cursor{{Step: 3, Attempt: 2, Seq: 4, Compensating: true}},
		Stack:     []saga.Completion{{Step: 0, Seq: 1}, {Step: 3, Seq: 4, Out: map[string]any{"id": "p"}, HasOut: true}},
		Outbox:    []durable.Message{{SagaID: "s-1", Version: 7, Queue: durable.QueueCompensate, Step: "charge", Attempt: 2, Delay: 1500 * time.Millisecond}},
		Seq:       4,
		CreatedAt: t0, UpdatedAt: t0.Add(time.Minute), Deadline: t0.Add(24 * time.Hour),
		Failure:           &saga.StepError{Step: "check", Type: "AssertionFailed", Message: "payment not captured"},
		CompensationError: &saga.StepError{Step: "charge", Type: "Error", Message: "bank down"},
		Output:            []any{1.5, "x"},
		Kept: []saga.Delivery{{ID: "sig-1", Signal: "approved", Payload: map[string]any{"by": "ann"}, Child: 2},
			{ID: "cb:0011", Step: 3, Seq: 4, Attempt: 2, Err: &saga.StepError{Type: "Declined", Message: "no"}}},
		Received: 5, FromOutside: true,
		Seen:   []string{"sig-0", "sig-1", "cb:0011"},
		Secret: []byte("0123456789abcdef"),
	}
}

// forkStates are a parent waiting on a foreach's join, the same parent
// undoing its children, and one of the children.
func forkStates() []*saga.State {
	waiting := richState()
	waiting.Status = durable.StatusWaiting
	waiting.Cursors = []saga.Cursor{{Step: 5, Attempt: 1, Seq: 6, Fork: true, Children: 3, Lanes: 2, Version: 7}}
	waiting.ForkItems = []any{map[string]any{"sku": "a"}, nil, int64(3)}
	waiting.Forks = []saga.ForkVisit{{Step: 4, Seq: 2, Children: 1, Lanes: 1}, {Step: 5, Seq: 6, Children: 3, Lanes: 2}}
	waiting.Outbox = []durable.Message{
		{SagaID: "s-1", Version: 7, Queue: durable.QueueAdvance, Kind: durable.KindLaunch, Step: "ship_all", Attempt: 1, Child: 0},
		{SagaID: "s-1", Version: 7, Queue: durable.QueueAdvance, Kind: durable.KindLaunch, Step: "ship_all", Attempt: 1, Child: 1},
	}
	undoing := richState()
	undoing.Cursors = []saga.Cursor{{Step: 5, Attempt: 1, Seq: 6, Compensating: true, Fork: true, Children: 3, Lanes: 2, Version: 7, Child: 2}}
	undoing.UndoNext = []int{1, 0}
	undoing.Forks = []saga.ForkVisit{{Step: 5, Seq: 6, Children: 3, Lanes: 2}}
	undoing.Stack = []saga.Completion{{Step: 0, Seq: 1}, {Step: 5, Seq: 6, Children: 3}}
	undoing.Outbox = []durable.Message{{SagaID: durable.ChildID("s-1", "ship_all", 6, 2), Version: 4, Queue: durable.QueueCompensate, Kind: durable.KindUndo, Step: "ship_all", Attempt: 1}}
	child := richState()
	child.SagaID = durable.ChildID("s-1", "ship_all", 6, 0)
	child.Status = durable.StatusSucceeded
	child.Parent = &saga.ParentLink{ID: "s-1", Step: "ship_all", Seq: 6, Version: 7, Index: 0, Children: 3, Lanes: 2, Saga: true}
	child.Scope, child.LastOut, child.Undoing = map[string]any{"item": map[string]any{"sku": "a"}, "index": int64(0)}, "parcel", true
	child.Inherited = []string{"4111111111111111", "secret \"quoted\""}
	child.Outbox = []durable.Message{{SagaID: child.SagaID, Version: 7, Queue: durable.QueueAdvance, Kind: durable.KindEnded, Step: "ship_one", Attempt: 1}}
	ended := richState() // a branch that ended: its output is its last out
	ended.SagaID, ended.Status, ended.Parent = durable.ChildID("s-1", "fan", 2, 1), durable.StatusSucceeded, &saga.ParentLink{ID: "s-1", Step: "fan", Seq: 2, Version: 3, Index: 1, Children: 2}
	ended.LastOut = "reservation"
	ended.Output = ended.Vars["reservation"]
	return []*saga.State{waiting, undoing, child, ended}
}

// A branch's output is its last out: the state holds it once, so that a
// branch whose out fits also fits once it ends.
func TestBranchOutputIsEncodedOnce(t *testing.T) {
	t.Parallel()
	ended := forkStates()[3]
	big := strings.Repeat("x", 100<<10)
	ended.Vars["reservation"] = map[string]any{"id": big}
	ended.Output = ended.Vars["reservation"]
	once, err := ended.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(once) > 110<<10 {
		t.Fatalf("%d bytes: the output is written beside its var", len(once))
	}
	var got saga.State
	if err := got.UnmarshalBinary(once); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Output, ended.Output) {
		t.Fatalf("output %v, want the var reservation", got.Output)
	}
	ended.Output = map[string]any{"id": big} // equal, not the var itself: written out
	twice, _ := ended.MarshalBinary()
	if len(twice) < 200<<10 {
		t.Fatalf("%d bytes for an output that is a copy", len(twice))
	}
}

// findingOutState compensates a step whose outcome is unknown: its
// attempt 3 ran into its deadline, and its action runs again under its
// key (a forward retry that followed a Timeout is marked too).
func findingOutState() *saga.State {
	st := richState()
	st.Status = durable.StatusCompensating
	st.Cursors = []saga.Cursor{{Step: 3, Attempt: 2, Seq: 4, Compensating: true, Unknown: true}}
	st.Stack = []saga.Completion{{Step: 0, Seq: 1}, {Step: 3, Seq: 4, Unknown: true, Attempts: 3}}
	return st
}

// historyState is richState with the history of a saga that compensated,
// some of it dropped.
func historyState(t testing.TB) *saga.State {
	st := richState()
	r := drive(t, mustCompileFile(t, "testdata/valid/order.yaml"), orderIn(1), failing("charge"))
	st.History, st.HistoryDropped = r.st.History, 3
	return st
}

func TestStateRoundTrip(t *testing.T) {
	t.Parallel()
	p := mustCompileFile(t, "testdata/valid/order.yaml")
	states := append(forkStates(), findingOutState(), richState(), &saga.State{}, drive(t, p, orderIn(1), failing("charge")).st, drive(t, p, orderIn(1), failing()).st, historyState(t))
	for i, st := range states {
		b, err := st.MarshalBinary()
		if err != nil {
			t.Fatalf("state %d: %v", i, err)
		}
		var got saga.State
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("state %d: %v", i, err)
		}
		if !reflect.DeepEqual(normalizeEmpty(st), normalizeEmpty(&got)) {
			t.Errorf("state %d does not round-trip:\n got %#v\nwant %#v", i, got, *st)
		}
		again, _ := got.MarshalBinary()
		if !bytes.Equal(b, again) {
			t.Errorf("state %d: re-encoding differs", i)
		}
	}
}

// normalizeEmpty maps empty slices to nil: the encoding does not tell them apart.
func normalizeEmpty(st *saga.State) *saga.State {
	c := *st
	if len(c.Cursors) == 0 {
		c.Cursors = nil
	}
	if len(c.Stack) == 0 {
		c.Stack = nil
	}
	if len(c.Outbox) == 0 {
		c.Outbox = nil
	}
	return &c
}

func TestStateEncodingIsDeterministic(t *testing.T) {
	t.Parallel()
	first, _ := richState().MarshalBinary()
	for range 20 {
		b, _ := richState().MarshalBinary()
		if !bytes.Equal(first, b) {
			t.Fatal("two encodings of one state differ")
		}
	}
}

func TestStateUnknownFormatAndFields(t *testing.T) {
	t.Parallel()
	b, _ := richState().MarshalBinary()
	future := append([]byte{}, b...)
	future[2] = 9
	var st saga.State
	if err := st.UnmarshalBinary(future); !errors.Is(err, saga.ErrUnknownFormat) || !strings.Contains(err.Error(), "version 9") {
		t.Fatalf("err = %v, want ErrUnknownFormat naming version 9", err)
	}
	if err := st.UnmarshalBinary([]byte("{}")); err == nil || !strings.Contains(err.Error(), "bad header") {
		t.Fatalf("err = %v", err)
	}
	// A field from a newer build (tag 99, bytes and varint) is skipped.
	extended := binary.AppendUvarint(append([]byte{}, b...), 99<<3|1)
	extended = append(extended, 3, 'a', 'b', 'c')
	extended = binary.AppendUvarint(extended, 98<<3)
	extended = binary.AppendUvarint(extended, 12345)
	if err := st.UnmarshalBinary(extended); err != nil {
		t.Fatalf("extended state: %v", err)
	}
	if !reflect.DeepEqual(normalizeEmpty(&st), normalizeEmpty(richState())) {
		t.Fatal("extended state decoded differently")
	}
}

func TestStateTruncatedIsAnError(t *testing.T) {
	t.Parallel()
	b, _ := richState().MarshalBinary()
	for n := 3; n < len(b); n++ {
		var st saga.State
		err := st.UnmarshalBinary(b[:n])
		if err == nil && reflect.DeepEqual(normalizeEmpty(&st), normalizeEmpty(richState())) {
			t.Fatalf("prefix of %d/%d bytes decoded as the whole state", n, len(b))
		}
	}
}

func TestStateRejectsValuesItCannotStore(t *testing.T) {
	t.Parallel()
	st := &saga.State{Vars: map[string]any{"ch": make(chan int)}}
	if _, err := st.MarshalBinary(); err == nil || !strings.Contains(err.Error(), "chan int") {
		t.Fatalf("err = %v", err)
	}
}

// A state written before histories were kept decodes with none.
func TestStateWithoutHistory(t *testing.T) {
	t.Parallel()
	b, _ := richState().MarshalBinary()
	var st saga.State
	if err := st.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	entries, err := st.HistoryEntries(nil)
	if st.History != nil || st.HistoryDropped != 0 || entries != nil || err != nil {
		t.Fatalf("history %v, dropped %d, entries %v, %v", st.History, st.HistoryDropped, entries, err)
	}
	with, _ := historyState(t).MarshalBinary()
	if err := st.UnmarshalBinary(with); err != nil || len(st.History) == 0 || st.HistoryDropped != 3 {
		t.Fatalf("with a history: %v, %d bytes, %d dropped", err, len(st.History), st.HistoryDropped)
	}
}

func FuzzStateDecode(f *testing.F) {
	b, _ := richState().MarshalBinary()
	f.Add(b)
	b, _ = historyState(f).MarshalBinary()
	f.Add(b)
	f.Add([]byte("LS\x01"))
	f.Add([]byte("LS\x01\x3a\x05\x09\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var st saga.State
		if err := st.UnmarshalBinary(data); err != nil {
			return
		}
		_, _ = st.HistoryEntries(nil) // damaged or not, it reads without a panic
		// Whatever decodes must encode and decode to the same state.
		out, err := st.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded state does not encode: %v", err)
		}
		var again saga.State
		if err := again.UnmarshalBinary(out); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(normalizeEmpty(&st), normalizeEmpty(&again)) {
			t.Fatalf("unstable round trip")
		}
	})
}

// The Unix epoch is a time like any other, not "no time", and the zero
// time stays zero (FuzzStateDecode reaches both).
func TestStateTimesAtTheEpoch(t *testing.T) {
	t.Parallel()
	st := &saga.State{SagaID: "e", CreatedAt: time.Unix(0, 0).UTC(), UpdatedAt: time.Unix(-1, 0).UTC()}
	b, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got saga.State
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(st.CreatedAt) || got.CreatedAt.IsZero() || !got.UpdatedAt.Equal(st.UpdatedAt) || !got.Deadline.IsZero() {
		t.Fatalf("created %v updated %v deadline %v", got.CreatedAt, got.UpdatedAt, got.Deadline)
	}
}

// A saga that ends without a succeed step has its vars as output, and the
// state must not hold them twice: the payload would double.
func TestStateOutputThatIsVarsIsStoredOnce(t *testing.T) {
	t.Parallel()
	blob := strings.Repeat("x", 100_000)
	st := &saga.State{SagaID: "s", Vars: map[string]any{"r0": map[string]any{"blob": blob}}}
	st.Output = st.Vars
	b, err := st.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 110_000 {
		t.Fatalf("state is %d bytes: the vars are stored twice", len(b))
	}
	var got saga.State
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Output, got.Vars) || !reflect.DeepEqual(got.Vars, st.Vars) {
		t.Fatal("output is not the vars after decoding")
	}
	// An output that merely equals the vars, but is another map, is kept as it is.
	st.Output = map[string]any{"r0": map[string]any{"blob": blob}}
	b, _ = st.MarshalBinary()
	var again saga.State
	_ = again.UnmarshalBinary(b)
	if !reflect.DeepEqual(again.Output, st.Output) {
		t.Fatal("a separate output changed")
	}
}
