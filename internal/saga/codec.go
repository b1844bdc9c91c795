package saga

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// The state encoding: a 3-byte header ("LS" and the format version) and then
// tagged fields, each a uvarint key (tag<<3 | wire type) and a payload.
// Readers skip tags they do not know, so new fields (timers, signals,
// branches, children) are added as new tags without a format change; the
// version byte moves only if an existing field changes meaning.
//
// Wire types: 0 a uvarint, 1 length-prefixed bytes (strings, nested records,
// values). A value is a type byte and its payload; maps are written with
// sorted keys, so equal states encode to equal bytes.
const (
	formatVersion = 1
	wireVarint    = 0
	wireBytes     = 1
)

// State field tags. Never reuse a number.
const (
	tagSagaID            = 1
	tagName              = 2
	tagDefinitionHash    = 3
	tagStatus            = 4
	tagVersion           = 5
	tagInput             = 6
	tagVars              = 7
	tagCursor            = 8
	tagCompletion        = 9
	tagOutbox            = 10
	tagSeq               = 11
	tagCreatedAt         = 12
	tagUpdatedAt         = 13
	tagDeadline          = 14
	tagFailure           = 15
	tagCompensationError = 16
	tagOutput            = 17
	tagOutputIsVars      = 18 // the output is the vars map itself (a saga ending without succeed)
	tagCancelRequested   = 19
	tagStatusSince       = 20
	tagKept              = 21
	tagReceived          = 22
	tagSeen              = 23
	tagSecret            = 24
	tagFromOutside       = 25
	tagParent            = 26
	tagScope             = 27
	tagLastOut           = 28
	tagUndoing           = 29
	tagForkItems         = 30
	tagUndoNext          = 31
	tagJoined            = 32
	tagUndid             = 33
	tagHistory           = 34 // State.History, as history.go encodes it
	tagHistoryDropped    = 35
	tagTrace             = 36
	tagInherited         = 37 // one per State.Inherited entry, in order
	tagOutputIsLastOut   = 38 // the output is the var LastOut names (a branch's or iteration's end)
	tagForkVisit         = 39 // one per State.Forks entry, in order
	tagCarrier           = 40
	tagObjects           = 41 // State.Objects, or a reference written in this encoding
)

// Value type bytes.
const (
	valNil = iota
	valFalse
	valTrue
	valInt
	valUint
	valDouble
	valString
	valBytes
	valList
	valMap
	valTimestamp
	valDuration
	valRef // a value kept as an object (Ref): its size, then its SHA-256
)

var statusCodes = []durable.Status{"", durable.StatusRunning, durable.StatusWaiting, durable.StatusCompensating, durable.StatusSucceeded, durable.StatusCompensated, durable.StatusCompensationFailed, durable.StatusHeld}
var queueCodes = []durable.QueueName{"", durable.QueueAdvance, durable.QueueCompensate}

// MarshalBinary encodes the state.
func (st *State) MarshalBinary() ([]byte, error) { return st.AppendBinary(make([]byte, 0, 256)) }

// AppendBinary appends the encoded state to b, every value inline.
func (st *State) AppendBinary(b []byte) ([]byte, error) { return st.appendWith(b, nil) }

// appendWith appends the encoded state to b, keeping the values off says
// apart as references (nil: none).
func (st *State) appendWith(b []byte, off *Offload) ([]byte, error) {
	e := encoder{b: append(b, 'L', 'S', formatVersion), off: off}
	e.str(tagSagaID, st.SagaID)
	e.str(tagName, st.Name)
	e.str(tagDefinitionHash, st.DefinitionHash)
	e.uint(tagStatus, uint64(slices.Index(statusCodes, st.Status)))
	e.uint(tagVersion, st.Version)
	// Input and vars are maps of values: each value's depth counts from
	// itself, as CheckValue counts it, so the map is level -1.
	if st.Input != nil {
		// Secrets stay inline: a redactor reads their text from the state
		// wherever it is shown, references unread (offload.go).
		if off != nil {
			e.inline = off.KeepInput
			if len(st.Inherited) > 0 {
				e.inlineAll = true
			}
		}
		e.valueAt(tagInput, st.Input, -1)
		e.inline, e.inlineAll = nil, false
	}
	if st.Vars != nil {
		e.valueAt(tagVars, st.Vars, -1)
	}
	for _, c := range st.Cursors {
		e.cursor(tagCursor, c)
	}
	for _, c := range st.Stack {
		e.completion(tagCompletion, c)
	}
	for _, m := range st.Outbox {
		e.message(tagOutbox, m, st.SagaID)
	}
	e.uint(tagSeq, st.Seq)
	e.time(tagCreatedAt, st.CreatedAt)
	e.time(tagUpdatedAt, st.UpdatedAt)
	e.time(tagStatusSince, st.StatusSince)
	e.time(tagDeadline, st.Deadline)
	e.stepError(tagFailure, st.Failure)
	e.stepError(tagCompensationError, st.CompensationError)
	if st.CancelRequested {
		e.uint(tagCancelRequested, 1)
	}
	for _, d := range st.Kept {
		e.delivery(tagKept, d)
	}
	e.uint(tagReceived, st.Received)
	if st.FromOutside {
		e.uint(tagFromOutside, 1)
	}
	if st.Carrier != 0 {
		e.uint(tagCarrier, st.Carrier)
	}
	for _, id := range st.Seen {
		e.key(tagSeen, wireBytes) // even when empty: every entry comes back
		e.b = binary.AppendUvarint(e.b, uint64(len(id)))
		e.b = append(e.b, id...)
	}
	if len(st.Secret) > 0 {
		e.str(tagSecret, string(st.Secret))
	}
	if st.Parent != nil {
		e.parentLink(tagParent, st.Parent)
	}
	if st.Scope != nil {
		e.valueAt(tagScope, st.Scope, -1)
	}
	e.str(tagLastOut, st.LastOut)
	if st.Undoing {
		e.uint(tagUndoing, 1)
	}
	if st.ForkItems != nil {
		e.inlineAll = true // a list the decoder reads as one
		e.value(tagForkItems, st.ForkItems)
		e.inlineAll = false
	}
	e.uint(tagJoined, st.Joined)
	e.uint(tagUndid, uint64(st.Undid))
	if !st.Trace.IsZero() {
		e.trace(tagTrace, st.Trace)
	}
	for _, n := range st.Inherited {
		e.str(tagInherited, n) // never empty: MinSecretText bytes or more
	}
	for _, f := range st.Forks {
		e.forkVisit(tagForkVisit, f)
	}
	for _, k := range st.UndoNext {
		e.key(tagUndoNext, wireVarint) // even when 0: every entry comes back
		e.b = binary.AppendUvarint(e.b, uint64(k))
	}
	if len(st.History) > 0 {
		e.key(tagHistory, wireBytes)
		e.b = binary.AppendUvarint(e.b, uint64(len(st.History)))
		e.b = append(e.b, st.History...)
	}
	e.uint(tagHistoryDropped, st.HistoryDropped)
	if st.Output != nil {
		e.output(st)
	}
	// Last: whether any value above became a reference.
	if st.Objects || e.off != nil && e.off.Refs > 0 {
		e.uint(tagObjects, 1)
	}
	if e.err != nil {
		return nil, e.err
	}
	return e.b, nil
}

type encoder struct {
	b   []byte
	err error
	// off, when set, keeps values larger than off.Bytes apart (offload).
	// inline names the entries of the map being written that stay inline
	// whatever their size; inlineAll keeps every value inline.
	off       *Offload
	inline    []string
	inlineAll bool
}

func (e *encoder) key(tag, wire int) { e.b = appendKey(e.b, tag, wire) }

// appendKey appends a field's key to b. The helpers that write a whole
// field (uint, str, time, begin) nest their appends and store e.b once:
// e is a pointer, and every store through it also checks the garbage
// collector's write barrier.
func appendKey(b []byte, tag, wire int) []byte { return binary.AppendUvarint(b, uint64(tag<<3|wire)) }

func (e *encoder) uint(tag int, v uint64) {
	if v == 0 {
		return
	}
	e.b = binary.AppendUvarint(appendKey(e.b, tag, wireVarint), v)
}

func (e *encoder) str(tag int, s string) {
	if s == "" {
		return
	}
	e.b = append(binary.AppendUvarint(appendKey(e.b, tag, wireBytes), uint64(len(s))), s...)
}

// time writes zigzag(UnixNano)+1, so that 0 stays free for "no time"
// and the Unix epoch is a time like any other.
func (e *encoder) time(tag int, t time.Time) {
	if t.IsZero() {
		return
	}
	e.b = binary.AppendUvarint(appendKey(e.b, tag, wireVarint), zigzag(t.UnixNano())+1)
}

// delivery writes a kept delivery: a signal's name, or a callback's step,
// visit and attempt; its id, payload and error.
func (e *encoder) delivery(tag int, d Delivery) {
	at := e.begin(tag)
	e.str(1, d.ID)
	e.str(2, d.Signal)
	e.uint(3, uint64(d.Step))
	e.uint(4, d.Seq)
	e.uint(5, uint64(d.Attempt))
	if d.Payload != nil {
		e.value(6, d.Payload)
	}
	e.stepError(7, d.Err)
	e.uint(8, uint64(d.Child))
	e.end(at)
}

// cursor writes a step the saga waits on.
func (e *encoder) cursor(tag int, c Cursor) {
	at := e.begin(tag)
	e.uint(1, uint64(c.Step))
	e.uint(2, uint64(c.Attempt))
	e.uint(3, c.Seq)
	if c.Compensating {
		e.uint(4, 1)
	}
	if c.Wait {
		e.uint(5, 1)
	}
	e.time(6, c.Due)
	if c.Fork {
		e.uint(7, 1)
	}
	e.uint(8, uint64(c.Children))
	e.uint(9, uint64(c.Lanes))
	e.uint(11, c.Version)
	e.uint(12, uint64(c.Child))
	if c.Unknown {
		e.uint(13, 1)
	}
	if c.Held {
		e.uint(14, 1)
	}
	e.uint(15, uint64(c.Budget))
	e.end(at)
}

// completion writes an entry of the compensation stack.
func (e *encoder) completion(tag int, c Completion) {
	at := e.begin(tag)
	e.uint(1, uint64(c.Step))
	e.uint(2, c.Seq)
	if c.HasOut {
		e.value(3, c.Out)
	}
	if c.OutDropped {
		e.uint(4, 1)
	}
	e.uint(5, uint64(c.Children))
	if c.Unknown {
		e.uint(6, 1)
		e.uint(7, uint64(c.Attempts))
	}
	if c.HasInput {
		e.value(8, c.Input)
	}
	e.end(at)
}

// message writes a message of the outbox. Its saga id is written only
// when it is not sagaID, the saga's own.
func (e *encoder) message(tag int, m durable.Message, sagaID string) {
	at := e.begin(tag)
	e.uint(2, m.Version)
	e.uint(3, uint64(slices.Index(queueCodes, m.Queue)))
	e.str(4, m.Step)
	e.uint(5, uint64(m.Attempt))
	e.uint(6, uint64(m.Delay))
	if m.SagaID != sagaID {
		e.str(7, m.SagaID) // a fork's message to a parent or a child
	}
	e.str(8, string(m.Kind))
	e.uint(9, uint64(m.Child))
	e.end(at)
}

// parentLink writes a child run's link to the fork that started it.
func (e *encoder) parentLink(tag int, l *ParentLink) {
	at := e.begin(tag)
	e.str(1, l.ID)
	e.str(2, l.Step)
	e.uint(3, l.Seq)
	e.uint(4, l.Version)
	e.uint(5, uint64(l.Index))
	e.uint(6, uint64(l.Children))
	e.uint(7, uint64(l.Lanes))
	if l.Saga {
		e.uint(8, 1)
	}
	e.end(at)
}

// forkVisit writes a visit of a fork step.
func (e *encoder) forkVisit(tag int, f ForkVisit) {
	at := e.begin(tag)
	e.uint(1, uint64(f.Step))
	e.uint(2, f.Seq)
	e.uint(3, uint64(f.Children))
	e.uint(4, uint64(f.Lanes))
	e.end(at)
}

// trace writes a trace context as its traceContextBytes bytes.
func (e *encoder) trace(tag int, tc TraceContext) {
	e.key(tag, wireBytes)
	e.b = append(e.b, traceContextBytes)
	e.b = append(e.b, tc.TraceID[:]...)
	e.b = append(e.b, tc.SpanID[:]...)
	e.b = append(e.b, tc.Flags)
}

// output writes the saga's output, which the state may hold already: the
// vars map, or the var LastOut names, is written as a flag.
func (e *encoder) output(st *State) {
	switch {
	case sameValue(st.Output, st.Vars):
		e.uint(tagOutputIsVars, 1)
	case st.LastOut != "" && sameValue(st.Output, st.Vars[st.LastOut]):
		// A branch's or iteration's output is its last out: held once.
		e.uint(tagOutputIsLastOut, 1)
	default:
		e.value(tagOutput, st.Output)
	}
}

func (e *encoder) stepError(tag int, se *StepError) {
	if se == nil {
		return
	}
	at := e.begin(tag)
	e.str(1, se.Step)
	e.str(2, se.Type)
	e.str(3, se.Message)
	e.end(at)
}

// begin starts a length-prefixed field, reserving one byte for its length.
func (e *encoder) begin(tag int) int {
	e.b = append(appendKey(e.b, tag, wireBytes), 0)
	return len(e.b)
}

// end writes the length of the field begun at start, moving its body when
// the length needs more than one byte.
func (e *encoder) end(start int) {
	n := len(e.b) - start
	if n < 0x80 {
		e.b[start-1] = byte(n)
		return
	}
	var lb [binary.MaxVarintLen64]byte
	w := binary.PutUvarint(lb[:], uint64(n))
	e.b = append(e.b, lb[:w-1]...)
	copy(e.b[start+w-1:], e.b[start:start+n])
	copy(e.b[start-1:], lb[:w])
}

func (e *encoder) value(tag int, v any) { e.valueAt(tag, v, 0) }

func (e *encoder) valueAt(tag int, v any, depth int) {
	at := e.begin(tag)
	e.val(v, depth)
	e.end(at)
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func (e *encoder) val(v any, depth int) {
	if depth == 0 && e.off != nil && !e.inlineAll && e.offload(v) {
		return
	}
	e.plain(v, depth)
}

// plain writes v inline.
func (e *encoder) plain(v any, depth int) {
	if depth > MaxDataDepth {
		if e.err == nil {
			e.err = fmt.Errorf("encode state: %w", errTooDeep)
		}
		e.b = append(e.b, valNil)
		return
	}
	switch t := v.(type) {
	case nil:
		e.b = append(e.b, valNil)
	case bool:
		if t {
			e.b = append(e.b, valTrue)
		} else {
			e.b = append(e.b, valFalse)
		}
	case int64:
		e.b = binary.AppendUvarint(append(e.b, valInt), zigzag(t))
	case uint64:
		e.b = binary.AppendUvarint(append(e.b, valUint), t)
	case float64:
		e.b = binary.LittleEndian.AppendUint64(append(e.b, valDouble), math.Float64bits(t))
	case string:
		e.b = binary.AppendUvarint(append(e.b, valString), uint64(len(t)))
		e.b = append(e.b, t...)
	case []byte:
		e.b = binary.AppendUvarint(append(e.b, valBytes), uint64(len(t)))
		e.b = append(e.b, t...)
	case time.Time:
		e.b = binary.AppendUvarint(append(e.b, valTimestamp), zigzag(t.Unix()))
		e.b = binary.AppendUvarint(e.b, uint64(t.Nanosecond()))
	case time.Duration:
		e.b = binary.AppendUvarint(append(e.b, valDuration), zigzag(int64(t)))
	case []any:
		e.b = binary.AppendUvarint(append(e.b, valList), uint64(len(t)))
		for _, x := range t {
			e.val(x, depth+1)
		}
	case map[string]any:
		e.b = binary.AppendUvarint(append(e.b, valMap), uint64(len(t)))
		var small [16]string
		keys := small[:0]
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			e.b = binary.AppendUvarint(e.b, uint64(len(k)))
			e.b = append(e.b, k...)
			if depth == -1 && e.inline != nil && slices.Contains(e.inline, k) {
				e.inlineAll = true
				e.val(t[k], depth+1)
				e.inlineAll = false
				continue
			}
			e.val(t[k], depth+1)
		}
	default:
		if e.err == nil {
			e.err = fmt.Errorf("encode state: a %T cannot be stored", v)
		}
		e.b = append(e.b, valNil)
	}
}

// UnmarshalBinary decodes a state encoded by MarshalBinary. An unknown
// format version is ErrUnknownFormat; damaged data is a clear error.
func (st *State) UnmarshalBinary(data []byte) error {
	_, err := st.UnmarshalBinaryRefs(data)
	return err
}

// UnmarshalBinaryRefs is UnmarshalBinary, and reports whether the state
// holds references to values kept as objects (Hydrate replaces them):
// the engine asks it of every state it reads, at no cost.
func (st *State) UnmarshalBinaryRefs(data []byte) (bool, error) {
	*st = State{}
	if len(data) < 3 || data[0] != 'L' || data[1] != 'S' {
		return false, errors.New("decode state: not lambdasaga state (bad header)")
	}
	if data[2] != formatVersion {
		return false, fmt.Errorf("%w: version %d (this build reads version %d)", ErrUnknownFormat, data[2], formatVersion)
	}
	d := stateDecoder{decoder: decoder{b: data[3:]}}
	for d.more() {
		tag, wire := d.key()
		if !d.field(st, tag, wire) && !d.treeField(st, tag, wire) {
			d.skip(wire)
		}
	}
	for i := range st.Outbox {
		if st.Outbox[i].SagaID == "" {
			st.Outbox[i].SagaID = st.SagaID
		}
	}
	if d.outputIsVars {
		st.Output = st.Vars
	}
	if d.outputIsLastOut {
		st.Output = st.Vars[st.LastOut]
	}
	if d.err != nil {
		return false, fmt.Errorf("decode state: %w", d.err)
	}
	return d.refs, nil
}

// stateDecoder reads the top-level fields of a state. An output that is
// the vars map, or the var LastOut names, comes as a flag, taken once
// every field is read.
type stateDecoder struct {
	decoder
	outputIsVars, outputIsLastOut bool
}

// field decodes into st one of the fields every saga has (the cases in the
// order AppendBinary writes them), and reports false for any other tag, or
// a known tag of another wire type.
func (d *stateDecoder) field(st *State, tag, wire int) bool {
	switch {
	case tag == tagSagaID && wire == wireBytes:
		st.SagaID = d.str()
	case tag == tagName && wire == wireBytes:
		st.Name = intern(d.bytes())
	case tag == tagDefinitionHash && wire == wireBytes:
		st.DefinitionHash = intern(d.bytes())
	case tag == tagStatus && wire == wireVarint:
		code := d.uint()
		if code >= uint64(len(statusCodes)) {
			d.fail("unknown status code %d", code)
			break
		}
		st.Status = statusCodes[code]
	case tag == tagVersion && wire == wireVarint:
		st.Version = d.uint()
	case tag == tagInput && wire == wireBytes:
		st.Input = d.mapValue()
	case tag == tagVars && wire == wireBytes:
		st.Vars = d.mapValue()
	case tag == tagCursor && wire == wireBytes:
		st.Cursors = append(st.Cursors, d.cursor())
	case tag == tagCompletion && wire == wireBytes:
		st.Stack = append(st.Stack, d.completion())
	case tag == tagOutbox && wire == wireBytes:
		st.Outbox = append(st.Outbox, d.message())
	case tag == tagSeq && wire == wireVarint:
		st.Seq = d.uint()
	case tag == tagCreatedAt && wire == wireVarint:
		st.CreatedAt = d.time()
	case tag == tagUpdatedAt && wire == wireVarint:
		st.UpdatedAt = d.time()
	case tag == tagStatusSince && wire == wireVarint:
		st.StatusSince = d.time()
	case tag == tagDeadline && wire == wireVarint:
		st.Deadline = d.time()
	case tag == tagFailure && wire == wireBytes:
		st.Failure = d.stepError()
	case tag == tagCompensationError && wire == wireBytes:
		st.CompensationError = d.stepError()
	case tag == tagCancelRequested && wire == wireVarint:
		st.CancelRequested = d.uint() == 1
	case tag == tagKept && wire == wireBytes:
		st.Kept = append(st.Kept, d.delivery())
	case tag == tagReceived && wire == wireVarint:
		st.Received = d.uint()
	case tag == tagFromOutside && wire == wireVarint:
		st.FromOutside = d.uint() == 1
	case tag == tagCarrier && wire == wireVarint:
		st.Carrier = d.uint()
	case tag == tagSeen && wire == wireBytes:
		st.Seen = append(st.Seen, d.str())
	case tag == tagSecret && wire == wireBytes:
		st.Secret = []byte(d.str())
	case tag == tagTrace && wire == wireBytes:
		if b := d.bytes(); len(b) == traceContextBytes {
			copy(st.Trace.TraceID[:], b[:16])
			copy(st.Trace.SpanID[:], b[16:24])
			st.Trace.Flags = b[24]
		} // another length: a later format of it, read as none
	case tag == tagHistory && wire == wireBytes:
		if b := d.bytes(); len(b) > 0 {
			// Copied with room for the next transition's entries.
			st.History = append(make([]byte, 0, len(b)+historyRoom), b...)
		}
	case tag == tagHistoryDropped && wire == wireVarint:
		st.HistoryDropped = d.uint()
	case tag == tagOutput && wire == wireBytes:
		st.Output = d.valueField()
	case tag == tagOutputIsVars && wire == wireVarint:
		if d.uint() == 1 {
			d.outputIsVars = true
		}
	case tag == tagOutputIsLastOut && wire == wireVarint:
		d.outputIsLastOut = d.uint() == 1
	default:
		return false
	}
	return true
}

// treeField decodes one of the fields of a saga's place in a tree of
// forks into st: a child run's link to its parent and what its fork gave
// it, a parent's forks and the children it undoes. It reports false for
// any other tag, or a known tag of another wire type.
func (d *stateDecoder) treeField(st *State, tag, wire int) bool {
	switch {
	case tag == tagParent && wire == wireBytes:
		st.Parent = d.parentLink()
	case tag == tagScope && wire == wireBytes:
		st.Scope = d.mapValue()
	case tag == tagLastOut && wire == wireBytes:
		st.LastOut = d.str()
	case tag == tagObjects && wire == wireVarint:
		st.Objects = d.uint() != 0
	case tag == tagUndoing && wire == wireVarint:
		st.Undoing = d.uint() == 1
	case tag == tagForkItems && wire == wireBytes:
		items, ok := d.valueField().([]any)
		if !ok {
			d.fail("a fork's items are not a list")
		}
		st.ForkItems = items
	case tag == tagJoined && wire == wireVarint:
		st.Joined = d.uint()
	case tag == tagUndid && wire == wireVarint:
		st.Undid = d.int()
	case tag == tagInherited && wire == wireBytes:
		st.Inherited = append(st.Inherited, d.str())
	case tag == tagForkVisit && wire == wireBytes:
		st.Forks = append(st.Forks, d.forkVisit())
	case tag == tagUndoNext && wire == wireVarint:
		st.UndoNext = append(st.UndoNext, d.int())
	default:
		return false
	}
	return true
}

type decoder struct {
	b    []byte
	err  error
	refs bool // a reference was read (offload.go)
}

func (d *decoder) more() bool { return d.err == nil && len(d.b) > 0 }

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
	d.b = nil
}

func (d *decoder) uint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	v := d.uint()
	if v > math.MaxInt32 {
		d.fail("number %d out of range", v)
		return 0
	}
	return int(v)
}

func (d *decoder) key() (int, int) {
	k := d.uint()
	return int(k >> 3), int(k & 7)
}

func (d *decoder) bytes() []byte {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail("length %d past the end of the data", n)
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) str() string { return string(d.bytes()) }

func (d *decoder) time() time.Time {
	v := d.uint()
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, unzigzag(v-1)).UTC()
}

func (d *decoder) skip(wire int) {
	switch wire {
	case wireVarint:
		d.uint()
	case wireBytes:
		d.bytes()
	default:
		d.fail("unknown wire type %d", wire)
	}
}

// nested decodes a length-prefixed record, handing each field to fn; fn
// returns false for fields it does not know, which are skipped.
func (d *decoder) nested(fn func(tag, wire int) bool) {
	body := d.bytes()
	outer := d.b
	d.b = body
	for d.more() {
		tag, wire := d.key()
		if !fn(tag, wire) {
			d.skip(wire)
		}
	}
	if d.err == nil {
		d.b = outer
	}
}

func (d *decoder) stepError() *StepError {
	se := &StepError{}
	d.nested(func(tag, wire int) bool {
		switch tag {
		case 1:
			se.Step = d.str()
		case 2:
			se.Type = d.str()
		case 3:
			se.Message = d.str()
		default:
			return false
		}
		return true
	})
	return se
}

// cursor reads a field as encoder.cursor writes it.
func (d *decoder) cursor() Cursor {
	var c Cursor
	d.nested(func(tag, wire int) bool {
		switch tag {
		case 1:
			c.Step = d.int()
		case 2:
			c.Attempt = d.int()
		case 3:
			c.Seq = d.uint()
		case 4:
			c.Compensating = d.uint() == 1
		case 5:
			c.Wait = d.uint() == 1
		case 6:
			c.Due = d.time()
		case 7:
			c.Fork = d.uint() == 1
		case 8:
			c.Children = d.int()
		case 9:
			c.Lanes = d.int()
		case 11:
			c.Version = d.uint()
		case 12:
			c.Child = d.int()
		case 13:
			c.Unknown = d.uint() == 1
		case 14:
			c.Held = d.uint() == 1
		case 15:
			c.Budget = d.int()
		default:
			return false
		}
		return true
	})
	return c
}

// completion reads a field as encoder.completion writes it.
func (d *decoder) completion() Completion {
	var c Completion
	d.nested(func(tag, wire int) bool {
		switch tag {
		case 1:
			c.Step = d.int()
		case 2:
			c.Seq = d.uint()
		case 3:
			c.Out, c.HasOut = d.valueField(), true
		case 4:
			c.OutDropped = d.uint() == 1
		case 5:
			c.Children = d.int()
		case 6:
			c.Unknown = d.uint() == 1
		case 7:
			c.Attempts = d.int()
		case 8:
			c.Input, c.HasInput = d.valueField(), true
		default:
			return false
		}
		return true
	})
	return c
}

// message reads a field as encoder.message writes it. A message without a
// saga id is the saga's own: UnmarshalBinary fills it in.
func (d *decoder) message() durable.Message {
	m := durable.Message{}
	d.nested(func(tag, wire int) bool {
		switch tag {
		case 2:
			m.Version = d.uint()
		case 3:
			q := d.uint()
			if q < uint64(len(queueCodes)) {
				m.Queue = queueCodes[q]
			} else {
				d.fail("unknown queue code %d", q)
			}
		case 4:
			m.Step = d.str()
		case 5:
			m.Attempt = d.int()
		case 6:
			m.Delay = time.Duration(d.uint())
		case 7:
			m.SagaID = d.str()
		case 8:
			m.Kind = durable.MessageKind(d.str())
		case 9:
			m.Child = d.int()
		default:
			return false
		}
		return true
	})
	return m
}

// delivery reads a field as encoder.delivery writes it.
func (d *decoder) delivery() Delivery {
	var k Delivery
	d.nested(func(tag, wire int) bool {
		switch {
		case tag == 1 && wire == wireBytes:
			k.ID = d.str()
		case tag == 2 && wire == wireBytes:
			k.Signal = d.str()
		case tag == 3 && wire == wireVarint:
			k.Step = d.int()
		case tag == 4 && wire == wireVarint:
			k.Seq = d.uint()
		case tag == 5 && wire == wireVarint:
			k.Attempt = d.int()
		case tag == 6 && wire == wireBytes:
			k.Payload = d.valueField()
		case tag == 7 && wire == wireBytes:
			k.Err = d.stepError()
		case tag == 8 && wire == wireVarint:
			k.Child = d.int()
		default:
			return false
		}
		return true
	})
	return k
}

// parentLink reads a field as encoder.parentLink writes it.
func (d *decoder) parentLink() *ParentLink {
	l := &ParentLink{}
	d.nested(func(tag, wire int) bool {
		switch tag {
		case 1:
			l.ID = d.str()
		case 2:
			l.Step = d.str()
		case 3:
			l.Seq = d.uint()
		case 4:
			l.Version = d.uint()
		case 5:
			l.Index = d.int()
		case 6:
			l.Children = d.int()
		case 7:
			l.Lanes = d.int()
		case 8:
			l.Saga = d.uint() == 1
		default:
			return false
		}
		return true
	})
	return l
}

// forkVisit reads a field as encoder.forkVisit writes it.
func (d *decoder) forkVisit() ForkVisit {
	var f ForkVisit
	d.nested(func(tag, wire int) bool {
		switch tag {
		case 1:
			f.Step = d.int()
		case 2:
			f.Seq = d.uint()
		case 3:
			f.Children = d.int()
		case 4:
			f.Lanes = d.int()
		default:
			return false
		}
		return true
	})
	return f
}

func (d *decoder) valueField() any { return d.valueFieldAt(0) }

func (d *decoder) valueFieldAt(depth int) any {
	body := d.bytes()
	outer := d.b
	d.b = body
	v := d.val(depth)
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d stray bytes after a value", len(d.b))
	}
	if d.err == nil {
		d.b = outer
	}
	return v
}

// mapValue reads a map of values (input, vars): level -1, as it is written.
func (d *decoder) mapValue() map[string]any {
	v := d.valueFieldAt(-1)
	if m, ok := v.(map[string]any); ok {
		return m
	}
	if d.err == nil {
		d.fail("expected a map, found %T", v)
	}
	return nil
}

func (d *decoder) val(depth int) any {
	if depth > MaxDataDepth {
		d.fail("value nested deeper than %d levels", MaxDataDepth)
		return nil
	}
	if len(d.b) == 0 {
		d.fail("truncated value")
		return nil
	}
	t := d.b[0]
	d.b = d.b[1:]
	switch t {
	case valNil:
		return nil
	case valFalse:
		return false
	case valTrue:
		return true
	case valInt:
		return unzigzag(d.uint())
	case valUint:
		return d.uint()
	case valDouble:
		if len(d.b) < 8 {
			d.fail("truncated double")
			return nil
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
		d.b = d.b[8:]
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.fail("a double that is not a finite number") // state never holds one (CheckValue refuses it)
			return nil
		}
		return f
	case valString:
		return d.str()
	case valBytes:
		return append([]byte{}, d.bytes()...)
	case valTimestamp:
		sec := unzigzag(d.uint())
		nsec := d.uint()
		if nsec >= 1e9 {
			d.fail("bad timestamp nanoseconds %d", nsec)
			return nil
		}
		return time.Unix(sec, int64(nsec)).UTC()
	case valDuration:
		return time.Duration(unzigzag(d.uint()))
	case valList:
		n := d.uint()
		if n > uint64(len(d.b)) { // every element takes at least one byte
			d.fail("list of %d elements past the end of the data", n)
			return nil
		}
		l := make([]any, n)
		for i := range l {
			l[i] = d.val(depth + 1)
		}
		return l
	case valMap:
		n := d.uint()
		if n > uint64(len(d.b))/2 {
			d.fail("map of %d entries past the end of the data", n)
			return nil
		}
		m := make(map[string]any, n)
		for range n {
			k := d.str()
			m[k] = d.val(depth + 1)
		}
		return m
	case valRef:
		if depth != 0 {
			d.fail("a reference nested in a value")
			return nil
		}
		return d.ref()
	}
	d.fail("unknown value type %d", t)
	return nil
}

// interned holds saga names and definition hashes: few distinct values,
// decoded at every step.
var interned = struct {
	sync.RWMutex
	m map[string]string
}{m: map[string]string{}}

func intern(b []byte) string {
	interned.RLock()
	s, ok := interned.m[string(b)]
	interned.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	interned.Lock()
	if len(interned.m) < 10_000 { // bounded: past it, strings are simply not shared
		interned.m[s] = s
	}
	interned.Unlock()
	return s
}

// sameValue reports whether out is v itself: the same map or list (not
// a copy: the vars map, a var's value), or an equal string, number or
// bool.
func sameValue(out, v any) bool {
	switch o := out.(type) {
	case map[string]any:
		m, ok := v.(map[string]any)
		return ok && m != nil && reflect.ValueOf(o).UnsafePointer() == reflect.ValueOf(m).UnsafePointer()
	case []any:
		l, ok := v.([]any)
		return ok && len(o) == len(l) && len(o) > 0 && &o[0] == &l[0]
	case []byte:
		return false // rare as an output: written out
	}
	switch v.(type) {
	case map[string]any, []any, []byte:
		return false
	}
	return out == v
}
