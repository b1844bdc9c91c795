package saga

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// The history (docs/PROTOCOL.md, "History") is kept in the saga's own
// item, so that it costs no request and no item of its own: every
// transition appends its entries to State.History before the one
// conditional write it makes anyway. Items are billed by the kilobyte, so
// the entries are small: a step of a linear saga adds about a dozen bytes.
//
// An entry is a uvarint head (the bits below), then, when it opens its
// transition, the transition's version, its time as milliseconds after
// the saga's CreatedAt, and its cause (the event kind, and the status the
// transition moved the saga to, or 0 when it kept the status); then the
// step's index plus one (0: no step), and the optional fields the head
// announces, in the order of its bits. A transition's header goes on its
// first entry; it is written when the transition ends, once its status is
// known. The bits most entries need fit the head's first byte; the rest
// (an error, a retry) make it two bytes.
const (
	histWhat     = 0x0f   // the outcome, of the step or its compensation (entryWhats)
	histAttempt  = 1 << 4 // an attempt other than 1
	histOpens    = 1 << 5 // the first entry of a transition: its header follows the head
	histTook     = 1 << 6 // the action call's duration, in milliseconds
	histError    = 1 << 7 // the error's type and message
	histDelay    = 1 << 8 // the delay before a retry, in milliseconds
	histSignal   = 1 << 9 // a kept signal's name
	histFork     = 1 << 10
	histHeadBits = 1<<11 - 1
)

// DefaultHistoryBytes bounds a saga's history when Options.HistoryBytes is
// zero: about 80 entries of steps that did not fail. Past it the oldest
// transitions are dropped, and counted (State.HistoryDropped).
const DefaultHistoryBytes = 1024

// MaxHistoryBytes is the largest bound Options.HistoryBytes may set.
const MaxHistoryBytes = 64 << 10

// historyRoom is the room a decoded history gets for the entries of the
// next transition: a step or two of most transitions, without allocating.
const historyRoom = 64

// MaxHistoryMessageBytes bounds an error message as the history keeps it
// (the saga's Failure keeps it whole, up to MaxErrorMessageBytes).
const MaxHistoryMessageBytes = 128

// OutcomeKept is the outcome of a history entry of a delivery kept for an
// await (or action) to come; Advance never reports it to Event.OnStep.
const OutcomeKept StepOutcome = "kept"

// entryWhat is an outcome, of a step or of its compensation.
type entryWhat struct {
	outcome StepOutcome
	comp    bool
}

// entryWhats are what entries record, as the history codes them (the
// index): never reorder. 0 is an entry of no step.
var entryWhats = []entryWhat{{}, {OutcomeStarted, false}, {OutcomeWaiting, false}, {OutcomeCompleted, false}, {OutcomeRetrying, false},
	{OutcomeFailed, false}, {OutcomeCaught, false}, {OutcomeKept, false},
	{OutcomeStarted, true}, {OutcomeRetrying, true}, {OutcomeCompensated, true}, {OutcomeCompensationFailed, true}, {OutcomeSkipped, true}}

// whatCode is the code of an outcome (its index in entryWhats); a pair no
// step records is coded without its compensation.
func whatCode(o StepOutcome, comp bool) uint8 {
	if comp {
		switch o {
		case OutcomeStarted:
			return 8
		case OutcomeRetrying:
			return 9
		case OutcomeCompensated:
			return 10
		case OutcomeCompensationFailed:
			return 11
		case OutcomeSkipped:
			return 12
		}
	}
	switch o {
	case OutcomeStarted:
		return 1
	case OutcomeWaiting:
		return 2
	case OutcomeCompleted:
		return 3
	case OutcomeRetrying:
		return 4
	case OutcomeFailed:
		return 5
	case OutcomeCaught:
		return 6
	case OutcomeKept:
		return 7
	}
	return 0
}

// HistoryEntry is one thing that happened to a saga: a step of one of its
// transitions, or a transition that went through no step.
type HistoryEntry struct {
	// Version is the version the transition wrote; a kept delivery's
	// is the version it kept.
	Version uint64
	// At is the transition's time (Event.Now), to the millisecond; a
	// clock behind the saga's start shows as its start.
	At time.Time
	// Cause is what made the transition: the saga's start, an action's
	// result, a timer, a join, or, from outside, a cancel, a resume, a
	// signal or a callback's completion (FromOutside).
	Cause EventKind
	// Status is the status the transition moved the saga to; empty when
	// it kept the status.
	Status durable.Status
	// Opens marks the first entry of its transition.
	Opens bool
	// StepIndex is the step's index in the plan (Cursor.Step); -1 for an
	// entry of no step (a cancel that waits for the pending action's
	// outcome, a kept signal).
	StepIndex int
	// Step and Kind are the step's id and kind, when the entries were
	// read with the plan the saga runs.
	Step string
	Kind lang.StepKind // the step's kind; see Step
	// Outcome is how the step ended in the transition; empty for an
	// entry of no step.
	Outcome StepOutcome
	// Attempt is the attempt that started or ended (0 for a skip).
	Attempt int
	// Compensation: the entry is of the step's compensation.
	Compensation bool
	// Took is how long the action (or compensation) call took, to the
	// millisecond, on the entry of its result; Timed says it was measured.
	Took  time.Duration
	Timed bool // Took was measured (it may be 0: under a millisecond)
	// Delay is the wait before the next attempt, for OutcomeRetrying.
	Delay time.Duration
	// Error is the failure, its message cut to MaxHistoryMessageBytes.
	Error *StepError
	// Signal is a kept signal's name.
	Signal string
	// Fork is, for a fork step (parallel, foreach, saga), its visit and
	// children: the child runs' ids are durable.ChildID(saga, Step,
	// Fork.Seq, index).
	Fork *HistoryFork
}

// HistoryFork is what a history entry of a fork step says of its fork.
type HistoryFork struct {
	Seq      uint64 // the fork's visit
	Children int    // how many children it starts
	Child    int    // the child being undone, on an entry of its compensation
}

// FromOutside reports whether the entry's transition came from outside
// the saga: a cancel, a resume (with or without a skip), a signal, a
// callback's completion, or an operator's retry or compensate of a held
// saga.
func (e *HistoryEntry) FromOutside() bool { return fromOutside(e.Cause) }

func fromOutside(k EventKind) bool {
	return k == EventCancel || k == EventResume || k == EventSignal || k == EventCallback || k == EventRetry || k == EventCompensate
}

// HistoryEntries decodes st.History, oldest first. p, when not nil, is
// the plan st runs: it names the steps. Damaged data is an error, with the
// entries read before it.
func (st *State) HistoryEntries(p *Plan) ([]HistoryEntry, error) {
	var out []HistoryEntry
	b := st.History
	var hdr histEntry
	for len(b) > 0 {
		var e histEntry
		n, err := e.parse(b, true)
		if err != nil {
			return out, fmt.Errorf("history entry %d: %w", len(out)+1, err)
		}
		b = b[n:]
		if e.opens {
			hdr = e
		} else if len(out) == 0 {
			return out, errors.New("history entry 1: no transition header")
		}
		w := entryWhats[e.what]
		he := HistoryEntry{Version: hdr.version, At: st.CreatedAt.Add(time.Duration(hdr.ms) * time.Millisecond), Cause: EventKind(hdr.cause & 0x0f),
			Opens: e.opens, StepIndex: e.step, Outcome: w.outcome, Attempt: e.attempt, Compensation: w.comp,
			Took: e.took, Timed: e.timed, Delay: e.delay, Signal: e.signal}
		if s := int(hdr.cause >> 4); s > 0 {
			he.Status = statusCodes[s]
		}
		if e.hasErr {
			he.Error = &StepError{Type: e.errType, Message: e.errMsg}
		}
		if e.fork {
			he.Fork = &HistoryFork{Seq: e.seq, Children: e.children, Child: e.child}
		}
		if p != nil && e.step >= 0 && e.step < len(p.steps) {
			he.Step, he.Kind = p.steps[e.step].ID, p.steps[e.step].Kind
			if he.Error != nil {
				he.Error.Step = he.Step
			}
		}
		out = append(out, he)
	}
	return out, nil
}

// histEntry is an entry as encoded.
type histEntry struct {
	opens   bool
	version uint64
	ms      uint64
	cause   uint8 // event kind | status code << 4

	what     uint8 // entryWhats
	step     int   // -1: none
	attempt  int
	timed    bool
	took     time.Duration
	delay    time.Duration
	hasErr   bool
	errType  string
	errMsg   string
	signal   string
	fork     bool
	seq      uint64
	children int
	child    int
}

func (e *histEntry) head() uint64 {
	h := uint64(e.what)
	set := func(bit uint64, on bool) {
		if on {
			h |= bit
		}
	}
	set(histAttempt, e.attempt != 1)
	set(histOpens, e.opens)
	set(histTook, e.timed)
	set(histError, e.hasErr)
	set(histDelay, e.delay > 0)
	set(histSignal, e.signal != "")
	set(histFork, e.fork)
	return h
}

// appendHeader appends a transition's header.
func appendHeader(b []byte, version, ms uint64, cause uint8) []byte {
	b = binary.AppendUvarint(b, version)
	b = binary.AppendUvarint(b, ms)
	return append(b, cause) // under 0x80: a kind under 16, a status code under 8
}

// appendBody appends an entry without its head and header.
func (e *histEntry) appendBody(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(e.step+1))
	if e.attempt != 1 {
		b = binary.AppendUvarint(b, uint64(e.attempt))
	}
	if e.timed {
		b = binary.AppendUvarint(b, millis(e.took))
	}
	if e.delay > 0 {
		b = binary.AppendUvarint(b, millis(e.delay))
	}
	if e.hasErr {
		b = appendString(b, e.errType)
		b = appendString(b, truncate(e.errMsg, MaxHistoryMessageBytes))
	}
	if e.signal != "" {
		b = appendString(b, e.signal)
	}
	if e.fork {
		b = binary.AppendUvarint(b, e.seq)
		b = binary.AppendUvarint(b, uint64(e.children))
		b = binary.AppendUvarint(b, uint64(e.child))
	}
	return b
}

// millis is d in whole milliseconds, within what the decoder reads.
func millis(d time.Duration) uint64 { return uint64(min(max(d.Milliseconds(), 0), math.MaxInt32)) }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// parse reads one entry from b and returns its length; strs: fill the
// strings (reading only to skip an entry leaves them).
func (e *histEntry) parse(b []byte, strs bool) (int, error) {
	d := decoder{b: b}
	h := d.uint()
	if h&^histHeadBits != 0 || h&histWhat >= uint64(len(entryWhats)) {
		d.fail("unknown entry head %#x", h)
	}
	e.what, e.opens = uint8(h&histWhat), h&histOpens != 0
	if e.opens {
		e.version, e.ms = d.uint(), d.uint()
		c := d.uint()
		if c&0x0f == 0 || c&0x0f > uint64(lastEventKind) || c>>4 >= uint64(len(statusCodes)) {
			d.fail("unknown transition cause %#x", c)
		}
		e.cause = uint8(c)
	}
	e.step = d.int() - 1
	e.attempt = 1
	if h&histAttempt != 0 {
		e.attempt = d.int()
	}
	if e.timed = h&histTook != 0; e.timed {
		e.took = time.Duration(d.int()) * time.Millisecond
	}
	if h&histDelay != 0 {
		e.delay = time.Duration(d.int()) * time.Millisecond
	}
	if e.hasErr = h&histError != 0; e.hasErr {
		t, m := d.bytes(), d.bytes()
		if strs {
			e.errType, e.errMsg = string(t), string(m)
		}
	}
	if h&histSignal != 0 {
		if s := d.bytes(); strs {
			e.signal = string(s)
		}
	}
	if e.fork = h&histFork != 0; e.fork {
		e.seq, e.children, e.child = d.uint(), d.int(), d.int()
	}
	if d.err != nil {
		return 0, d.err
	}
	return len(b) - len(d.b), nil
}

// historyWriter appends one transition's entries to a saga's history and
// keeps it within its bound.
type historyWriter struct {
	st    *State
	bound int // in bytes; 0 or less: keep no history
	from  int // where this transition's entries start in st.History
	n     int // entries this transition appended
}

func (w *historyWriter) begin(st *State, bound int) {
	*w = historyWriter{st: st, bound: bound, from: len(st.History)}
}

// headerRoom is what the header written at the end may add to the
// state, for measures taken before it.
func (w *historyWriter) headerRoom() int {
	if w.bound <= 0 {
		return 0
	}
	return 2*binary.MaxVarintLen64 + 1
}

func (w *historyWriter) add(e *histEntry) {
	if w.bound <= 0 {
		return
	}
	st := w.st
	st.History = binary.AppendUvarint(grow(st.History, 32), e.head())
	st.History = e.appendBody(st.History)
	w.n++
	if len(st.History)-w.from > w.bound {
		// One transition holds more than the bound (a long run of pure
		// steps): its own oldest entries go.
		w.dropOwn()
	}
	if len(st.History) > 2*w.bound && w.from > 0 {
		w.dropBefore(w.from)
	}
}

// end writes the transition's header on its first entry (an entry of no
// step when it went through none) and drops the oldest transitions past
// the bound.
func (w *historyWriter) end(version uint64, at time.Time, cause EventKind, status durable.Status) {
	if w.bound <= 0 {
		return
	}
	st := w.st
	if w.n == 0 {
		w.add(&histEntry{step: -1})
	}
	ms := uint64(0)
	if d := at.Sub(st.CreatedAt); d > 0 {
		ms = uint64(d.Milliseconds())
	}
	code := uint8(0)
	for i, s := range statusCodes {
		if s == status && s != "" {
			code = uint8(i)
		}
	}
	var buf [2*binary.MaxVarintLen64 + 1]byte
	hdr := appendHeader(buf[:0], version, ms, uint8(cause)|code<<4)
	// The head's first byte holds the opens bit; the header goes after
	// the head.
	h := st.History
	st.History[w.from] |= histOpens
	at0 := w.from + 1
	for h[at0-1]&0x80 != 0 {
		at0++
	}
	old := len(h)
	h = grow(h, len(hdr))[:old+len(hdr)]
	copy(h[at0+len(hdr):], h[at0:old])
	copy(h[at0:], hdr)
	st.History = h
	for len(st.History) > w.bound && w.from > 0 {
		// Whole transitions, oldest first, while the history is over
		// its bound and this one is not the only one left.
		if !w.dropFirst() {
			break
		}
	}
}

// dropFirst drops the oldest transition; false when what is before this
// transition cannot be read, which then goes, uncounted.
func (w *historyWriter) dropFirst() bool {
	h := w.st.History
	off, n := 0, 0
	for off < w.from {
		var e histEntry
		k, err := e.parse(h[off:w.from], false)
		if err != nil || n == 0 && !e.opens {
			w.cut(0, w.from, 0)
			return false
		}
		if n > 0 && e.opens {
			break
		}
		off += k
		n++
	}
	w.cut(0, off, n)
	return true
}

// dropBefore drops every entry before offset at (whole transitions).
func (w *historyWriter) dropBefore(at int) {
	n := 0
	for off := 0; off < at; {
		var e histEntry
		k, err := e.parse(w.st.History[off:at], false)
		if err != nil {
			break // damaged: not counted
		}
		off += k
		n++
	}
	w.cut(0, at, n)
}

// dropOwn drops this transition's oldest entries until its own are
// within the bound; they have no header yet.
func (w *historyWriter) dropOwn() {
	h := w.st.History
	off, n := w.from, 0
	for len(h)-off > w.bound && n < w.n-1 { // the newest entry stays
		var e histEntry
		k, err := e.parse(h[off:], false)
		if err != nil {
			break
		}
		off += k
		n++
	}
	w.cut(w.from, off, n)
	w.n -= n
}

// cut removes History[from:to], n entries, keeping the slice's array.
func (w *historyWriter) cut(from, to, n int) {
	h := w.st.History
	k := copy(h[from:], h[to:])
	w.st.History = h[:from+k]
	w.st.HistoryDropped += uint64(n)
	if w.from >= to {
		w.from -= to - from
	}
}

// grow makes room for n more bytes, past what one transition adds, so
// that appending rarely allocates.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	return append(make([]byte, 0, max(2*cap(b), len(b)+n+64, 128)), b...)
}

// remember adds a step record of step s to the transition's history.
func (r *runner) remember(s *planStep, rec StepRecord) {
	if r.hist.bound <= 0 {
		return
	}
	e := histEntry{what: whatCode(rec.Outcome, rec.Compensation), step: s.idx, attempt: rec.Attempt, delay: rec.Delay}
	if rec.Error != nil {
		e.hasErr, e.errType, e.errMsg = true, rec.Error.Type, rec.Error.Message
	}
	if r.hist.n == 0 && r.ev.Kind == EventResult && r.ev.Took > 0 {
		e.timed, e.took = true, r.ev.Took // the action's result is the transition's first entry
	}
	if cur, ok := r.st.Pending(); ok && cur.Fork && cur.Step == e.step && lang.IsFork(rec.Kind) {
		e.fork, e.seq, e.children = true, cur.Seq, cur.Children
		if cur.Compensating {
			e.child = cur.Child
		}
	}
	r.hist.add(&e)
}

// historyKept records a delivery kept for later: a transition of its own
// that keeps the version.
func (p *Plan) historyKept(st *State, ev *Event) {
	var w historyWriter
	w.begin(st, p.opts.HistoryBytes)
	d := ev.Delivery
	e := histEntry{what: whatCode(OutcomeKept, false), step: -1, signal: d.Signal}
	cause := EventSignal
	if d.Signal == "" {
		cause, e.step, e.attempt = EventCallback, d.Step, d.Attempt
	}
	if d.Err != nil {
		e.hasErr, e.errType, e.errMsg = true, d.Err.Type, d.Err.Message
	}
	w.add(&e)
	w.end(st.Version, ev.Now, cause, "")
}
