package saga

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/lambdasaga/lambdasaga/durable"
)

// State is one saga run: everything needed to continue it, stored as one item.
type State struct {
	SagaID         string         // the saga's id, set at the start
	Name           string         // the saga's name, from its definition
	DefinitionHash string         // DefinitionHash of the source the saga runs, pinned at the start
	Status         durable.Status // where the saga stands (docs/STATES.md)
	// Version counts transitions. Every write is conditional on the version
	// read, and moves it up by one.
	Version   uint64
	Input     map[string]any    // as CheckInput returned it at the start; never changes
	Vars      map[string]any    // written by out: and set:; the output when the saga succeeds without a succeed output
	Cursors   []Cursor          // pending work; one today, one per branch when parallel steps come
	Stack     []Completion      // completed steps that declared compensate, oldest first
	Outbox    []durable.Message // what the transition to Version must send
	Seq       uint64            // action visits so far: makes idempotency keys unique per visit
	CreatedAt time.Time         // the start's Event.Now
	UpdatedAt time.Time         // the last transition's Event.Now
	// StatusSince is the Event.Now of the transition that moved the saga
	// to its Status (or, if that clock was behind, a nanosecond after the
	// StatusSince before it: it only grows); transitions that keep the
	// status keep it. Stores list sagas by it (durable.SagaRecord.StatusSince).
	StatusSince time.Time
	Deadline    time.Time // zero: no saga timeout
	// Failure is why the saga compensates; nil while it has not failed.
	Failure *StepError
	// CompensationError is why compensation stopped, in compensation_failed.
	CompensationError *StepError
	// Output is the saga's result once it has succeeded: the succeed
	// step's output, or Vars; nil otherwise.
	Output any
	// CancelRequested marks a running saga that was cancelled while an
	// action was pending: the action's outcome is still awaited (it may have
	// taken effect), and then the saga compensates, that action included if
	// it succeeded.
	CancelRequested bool
	// FromOutside marks a version whose transition came from outside (a
	// cancel, a resume, a signal, a callback's completion), not from a
	// message of the version before: such a message, when it comes, is
	// not this transition's cause, and is dropped rather than re-sending
	// its outbox.
	FromOutside bool
	// Carrier, when not zero, is the version of the message whose
	// handling wrote this version with an action's (or compensation's)
	// result (docs/PROTOCOL.md, "Chains"): its own step's, the version
	// after it, or a step its chain ran from the state it held. That
	// message, coming back to a version past the one after it, sends this
	// version's outbox rather than being dropped as stale. Zero on a
	// version written otherwise (a start, a timer, a join, from outside);
	// but a cancel keeps the carrier of the version it lands on (the
	// carrier then runs the attempt the cancel waits for, even the chain's
	// first, run from the carrier's own version).
	Carrier uint64
	// Kept holds signals, and completions of callback tokens, that came
	// before the saga waited for them, oldest first: an await takes the
	// first of its signal's name, a callback step's attempt the one of its
	// token. At most lang.MaxKeptSignals, of lang.MaxKeptSignalBytes.
	Kept []Delivery
	// Received counts the writes that kept a delivery. Such a write keeps
	// the version (the messages in flight stay valid), so every write is
	// conditional on Received as well as on Version
	// (durable.SagaRecord.Received).
	Received uint64
	// Seen holds the ids of the latest deliveries applied or kept (at most
	// maxSeen): one sent twice is applied once.
	Seen []string
	// Secret keys the saga's callback tokens (CallbackToken); set at the
	// start of a saga whose definition has callback steps. Never shown.
	Secret []byte
	// Parent links a child run (a branch, an iteration, a child saga) to
	// the fork that started it; nil for a saga a user started.
	Parent *ParentLink
	// Scope is what a child run's expressions see beside input and vars
	// when it runs in a foreach body: each enclosing foreach's item under
	// its as name, and index, the innermost one's position; nil outside
	// any foreach body.
	Scope map[string]any
	// LastOut is the var the latest out of a branch or iteration wrote:
	// its value is the child run's output when the branch ends.
	LastOut string
	// ForkItems is, while a foreach forks, its list: one element per
	// child, read when a lane starts its next child.
	ForkItems []any
	// UndoNext lists the children of the fork being compensated still to
	// undo after the cursor's Child, in order; nil while compensating a
	// fork that succeeded, whose children are undone from Child down to 0.
	UndoNext []int
	// Joined is the version of the fork whose join wrote this version
	// (Cursor.Version), and Undid one more than the index of the child
	// whose undo's end wrote it; zero otherwise. A join or an end that
	// comes again sends this version's outbox again only if it caused it
	// (as rule 3), so that repeats never multiply messages.
	Joined uint64
	// Undid is one more than the index of the child whose undo's end
	// wrote this version; zero otherwise (see Joined).
	Undid int
	// Undoing marks a child run that compensates because its parent does
	// (a KindUndo): its end is reported to the parent's compensation.
	Undoing bool
	// History is what happened to the saga, oldest first, encoded
	// compactly (docs/PROTOCOL.md, "History"): read it with
	// HistoryEntries. Every transition appends its steps; the oldest
	// transitions are dropped past the plan's bound (Options.HistoryBytes).
	History []byte
	// HistoryDropped counts the entries dropped to keep History within
	// its bound.
	HistoryDropped uint64
	// Trace is the span the saga's spans descend from (tracing on); zero
	// when it was started and handled untraced. A child run takes its
	// parent's.
	Trace TraceContext
	// Inherited are the texts of its ancestors' secrets that a child
	// run's input holds (ChildStart.Secrets): its Redactor hides them as
	// it hides its own secrets. Nil for a saga started from outside.
	Inherited []string
	// Forks lists every visit the saga made to a fork step, oldest first:
	// from them follow the ids of its children and the keys of its fork
	// records (durable.ChildID, durable.ForkKey), which expire with the
	// tree's root once it ends for good (durable.KindExpire). Kept until
	// the saga ends, also once the fork is joined or undone.
	Forks []ForkVisit
	// Objects: a version of the saga was written with a value kept as an
	// object (a reference), so its objects are marked when its tree ends
	// for good (durable.ObjectsEnder), even if no reference is left by
	// then. Never cleared. Encoding a state with a reference sets it in
	// the encoding; RecordOffload's caller sets it in memory (Offload.Refs).
	Objects bool
	// Resends is how many times the sweep has sent the outbox of this
	// version again (durable.SagaRecord.Resends): kept by the store
	// beside the state, not encoded in it, and filled by the reads that
	// show it (engine.Coordinator.Get).
	Resends int
}

// Cursor is work a saga waits for: an action (or compensation) to run.
type Cursor struct {
	Step         int    // index of the step in the plan
	Attempt      int    // 1-based
	Seq          uint64 // visit number, part of the idempotency key
	Compensating bool   // the work is the step's compensation, on the compensate queue
	// Wait: the cursor is a wait step's timer; nothing runs until it is
	// due (the saga is waiting).
	Wait bool
	Due  time.Time // when a Wait cursor's timer is due
	// Fork: the cursor is a fork step (parallel, foreach, saga) whose
	// children run as sagas of their own: forward, the saga waits for its
	// join; compensating, for child Child to be undone.
	Fork     bool
	Children int    // fork: how many children it starts (N)
	Lanes    int    // fork: how many run at once (C, at most Children)
	Version  uint64 // fork: the version the fork transition wrote; its join names it
	Child    int    // fork, compensating: the child being undone
	// Unknown, forward: the attempt before this one ran into its
	// deadline (a Timeout), so it may have taken effect; a cancel or the
	// saga's deadline that meets this attempt waiting out its backoff
	// puts the step on the stack to be found out. Compensating: the work
	// is finding out, running the step's action again under its key.
	Unknown bool
	// Held: the cursor is the step a held saga failed on, at its last
	// attempt; Due, when not zero, is when the hold ends (hold_for) and
	// the saga compensates. An operator's retry runs the step again.
	Held bool
	// Budget is how many attempts of the step ran before its retry
	// policy's budget started afresh (an operator's retry of a held
	// saga): the policy counts attempts after it. Attempt numbers go on,
	// so that a callback token of an earlier attempt never completes a
	// later one.
	Budget int
}

// ParentLink is where a child run came from: its parent saga, the fork
// step and visit, and its place among the fork's children.
type ParentLink struct {
	ID       string // the parent saga's id
	Step     string // the fork step's id
	Seq      uint64 // the fork's visit
	Version  uint64 // the version the parent's fork transition wrote
	Index    int    // the child's index: its branch, or its element of the list
	Children int    // how many children the fork starts
	Lanes    int    // how many of them run at once
	// Saga: the child is a child saga (a saga step), listed like any
	// saga; a branch or an iteration is not (durable.SagaRecord.Unlisted).
	Saga bool
}

// ForkVisit is one visit of a saga to a fork step: the step, the visit
// (its Cursor.Seq), how many children it started and in how many lanes.
type ForkVisit struct {
	Step     int    // index of the fork step in the plan
	Seq      uint64 // the visit, as in the children's ids
	Children int    // how many children it started (N)
	Lanes    int    // how many of them ran at once (C): child k is lane k mod C's
}

// Delivery is something sent to a saga from outside: a signal, or the
// completion of a callback token.
type Delivery struct {
	// ID tells repeats apart: the sender's id for a signal, the token's
	// for a callback (at most MaxDeliveryIDBytes).
	ID     string
	Signal string // a signal's name; empty for a callback's completion
	// Token is the callback token completed; parsed into Step, Seq and
	// Attempt when the delivery is kept.
	Token   string
	Step    int    // callback: the step's index
	Seq     uint64 // callback: the visit the token is of
	Attempt int    // callback: the attempt the token is of
	// Payload is a signal's payload, or a callback's output: plain values
	// (CheckValue) of at most lang.MaxSignalBytes as JSON.
	Payload any
	Err     *StepError // a failed callback: its error type and message
	// Child is, for a signal a saga waiting on a fork keeps for one of
	// the fork's children yet to start, that child's index plus one; 0
	// when the n-th kept signal of its name goes to the n-th child that
	// may take it (those kept before the fork started, none of whose
	// children had).
	Child int
}

// Completion records a completed step that declared compensate.
type Completion struct {
	Step int    // index of the step in the plan
	Seq  uint64 // the visit that completed, as in its idempotency key
	// Out is the step's output, kept only for steps inside a loop, whose
	// var a later visit may overwrite before compensation reads it.
	Out    any
	HasOut bool // Out was kept (it may be nil)
	// OutDropped: the action succeeded but its output could not be kept
	// (too large or not a value state holds), so its var was not written.
	OutDropped bool
	// Children is, for a fork step, how many children it started: each
	// succeeded, and is undone as a whole when the saga compensates.
	Children int
	// Unknown: the step's last attempt ran into its deadline (a Timeout)
	// and no attempt after it ran: it may have taken effect. Compensating
	// finds it out first, running the action again under the same
	// idempotency key (the service answers what it did): a success is
	// then compensated, a definite failure took no effect.
	Unknown bool
	// Attempts is, for an Unknown step, how many attempts of its action
	// ran; the calls that find it out are numbered after them.
	Attempts int
	// Input is, for an Unknown step, the input its attempts had, so that
	// the calls that find it out ask with the same one whatever changed
	// since (a catch moved on and vars changed).
	Input any
	// HasInput: Input was kept (it may be nil); without it the input is
	// evaluated again, as the last attempt.
	HasInput bool
}

// StepError is a failure recorded in state: ids and type, never values.
type StepError struct {
	Step    string `json:"step,omitempty"` // the step that failed; empty when none did (a cancel, say)
	Type    string `json:"type"`           // the error type catch and retry.permanent match
	Message string `json:"message"`        // what went wrong; an action's message is cut to MaxErrorMessageBytes
}

// maxErrorTypeBytes bounds an error type kept in state.
const maxErrorTypeBytes = 128

// newStepError is a StepError with its type and message cut to their
// bounds, so no error an action returns can grow the state past them.
func newStepError(step, typ, msg string) *StepError {
	return &StepError{Step: step, Type: truncate(typ, maxErrorTypeBytes), Message: truncate(msg, MaxErrorMessageBytes)}
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…(cut)"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// Error returns "step STEP: Type: Message", or "Type: Message" without a step.
func (e *StepError) Error() string {
	if e.Step == "" {
		return e.Type + ": " + e.Message
	}
	return fmt.Sprintf("step %s: %s: %s", e.Step, e.Type, e.Message)
}

// errTooDeep is the error of a value nested past MaxDataDepth.
var errTooDeep = fmt.Errorf("value nested deeper than %d levels", MaxDataDepth)

// CheckValue reports whether v is made only of the plain values state can
// hold (nil, bool, int64, uint64, float64, string, []byte, time.Time,
// time.Duration, []any, map[string]any), and returns it with Go's other
// integer and float types widened, times in UTC with no monotonic reading
// and nil bytes empty: as the stored state decodes them, so that a chain
// going on from the state it holds sees what a read would give
// (docs/PROTOCOL.md, "Chains"). It never modifies v.
func CheckValue(v any) (any, error) {
	out, _, err := checkValue(v, 0)
	return out, err
}

// checkValue returns v, widened where needed, and whether anything changed:
// a map or list is copied only when something inside it changed.
func checkValue(v any, depth int) (any, bool, error) {
	if depth > MaxDataDepth {
		return nil, false, errTooDeep
	}
	switch t := v.(type) {
	case nil, bool, int64, uint64, string, time.Duration:
		return v, false, nil
	case []byte:
		if t == nil {
			return []byte{}, true, nil // an expression sees no difference, an action's JSON does: null against ""
		}
		return v, false, nil
	case time.Time:
		// Its location and monotonic reading show in an expression's
		// string() and in JSON, and a read loses them. == compares the
		// representation, not the instant: that is the point.
		if u := t.UTC(); u != t {
			return u, true, nil
		}
		return v, false, nil
	case int:
		return int64(t), true, nil
	case int8:
		return int64(t), true, nil
	case int16:
		return int64(t), true, nil
	case int32:
		return int64(t), true, nil
	case uint:
		return uint64(t), true, nil
	case uint8:
		return uint64(t), true, nil
	case uint16:
		return uint64(t), true, nil
	case uint32:
		return uint64(t), true, nil
	case float32:
		f, _, err := checkValue(float64(t), depth)
		return f, true, err
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return nil, false, fmt.Errorf("%v is not a finite number", t)
		}
		return v, false, nil
	case []any:
		var out []any
		for i, e := range t {
			c, changed, err := checkValue(e, depth+1)
			if err == errTooDeep {
				return nil, false, err // one message, not one prefix per level
			}
			if err != nil {
				return nil, false, fmt.Errorf("[%d]: %w", i, err)
			}
			if changed {
				if out == nil {
					out = append([]any(nil), t...)
				}
				out[i] = c
			}
		}
		if out != nil {
			return out, true, nil
		}
		return v, false, nil
	case map[string]any:
		var out map[string]any
		for k, e := range t {
			c, changed, err := checkValue(e, depth+1)
			if err == errTooDeep {
				return nil, false, err
			}
			if err != nil {
				return nil, false, fmt.Errorf("%s: %w", k, err)
			}
			if changed {
				if out == nil {
					out = make(map[string]any, len(t))
					for k2, e2 := range t {
						out[k2] = e2
					}
				}
				out[k] = c
			}
		}
		if out != nil {
			return out, true, nil
		}
		return v, false, nil
	}
	return nil, false, errors.New("a value of none of the language's types cannot be stored (use JSON-like values: maps with string keys, lists, strings, numbers, bools)")
}
