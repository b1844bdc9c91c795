package saga

import (
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// EventKind is what happened to a saga.
type EventKind uint8

const (
	// EventStart begins a new saga: State must be zero but for nothing.
	EventStart EventKind = iota + 1
	// EventResult reports the outcome of the pending action or compensation.
	EventResult
	// EventCancel asks a running saga to stop and compensate.
	EventCancel
	// EventResume continues a saga parked in compensation_failed.
	EventResume
	// EventTimer fires the timer of a waiting saga (State.WakeAt): the
	// wait it waits on ends, or its deadline has passed.
	EventTimer
	// EventSignal delivers a signal (Event.Delivery) to the await that
	// waits on it. Plan.Receive keeps one that nothing waits on yet.
	EventSignal
	// EventCallback completes (or fails) a callback token the saga waits
	// on (Event.Delivery). Plan.Receive keeps one that comes while the
	// action that got the token still runs.
	EventCallback
	// EventJoin ends the fork the saga waits on (Event.Join): every child
	// it started has ended.
	EventJoin
	// EventUndo compensates a child run that succeeded, as a whole,
	// because its parent compensates.
	EventUndo
	// EventUndone tells a saga undoing a fork's children that one of them
	// ended its compensation (Event.Undone).
	EventUndone
	// EventRetry runs the step a held saga failed on again, with a fresh
	// attempt budget (an operator fixed what made it fail).
	EventRetry
	// EventCompensate compensates a held saga, as its failure would have
	// at once without on_failure: hold.
	EventCompensate

	lastEventKind = EventCompensate // the history's decoder knows kinds up to it
)

// String returns the kind's name: "start", "result", "cancel", "resume",
// "timer", "signal", "callback", "join", "undo", "undone", "retry" or
// "compensate".
func (k EventKind) String() string {
	switch k {
	case EventStart:
		return "start"
	case EventResult:
		return "result"
	case EventCancel:
		return "cancel"
	case EventResume:
		return "resume"
	case EventTimer:
		return "timer"
	case EventSignal:
		return "signal"
	case EventCallback:
		return "callback"
	case EventJoin:
		return "join"
	case EventUndo:
		return "undo"
	case EventUndone:
		return "undone"
	case EventRetry:
		return "retry"
	case EventCompensate:
		return "compensate"
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is the input of one transition. Time and randomness come in with
// it, so Advance stays a pure function.
type Event struct {
	Kind EventKind // says which of the fields below apply
	// Now is the transition's time: saga.now in expressions, the state's
	// UpdatedAt, and what the saga's deadline is checked against.
	Now time.Time
	// Rand is a draw in [0, 1) from the caller's random source, for jitter.
	Rand float64

	// Deferred, on EventTimer, says the pending forward attempt was put
	// off by an operator's pause (the engine's deferral), not run by the
	// delivery that sends this event: once the saga's deadline has passed,
	// it fires. A delivery before the pause may have run the attempt (a
	// worker that died before writing its outcome), so it is taken as an
	// attempt whose outcome is unknown: found out if the saga compensates.
	Deferred bool

	// Skip, on EventResume, takes the failed compensation off the stack
	// without running it: an operator undid that step by hand.
	Skip bool

	SagaID string         // EventStart
	Input  map[string]any // EventStart: checked with Plan.CheckInput first
	// Secret, on EventStart, keys the saga's callback tokens: random bytes
	// (at least 16) when the plan has callback steps (Plan.HasCallbacks).
	Secret []byte

	// Delivery is what EventSignal and EventCallback deliver.
	Delivery Delivery

	// Child, on EventStart, starts a child run of a fork (Plan.Child)
	// instead of a saga at its first step.
	Child  *ChildStart
	Join   *Join   // EventJoin
	Undone *Undone // EventUndone

	Output any   // EventResult: the action's output, made of plain values (CheckValue)
	Err    error // EventResult: the action's error, nil on success
	// Took, on EventResult, is how long the action (or compensation)
	// call took, as the caller measured it: the saga's history keeps it.
	// Zero: not measured.
	Took time.Duration
	// Carrier, on EventResult, is the version of the message whose
	// handling ran the step: its own step, or one its chain runs after
	// it. The new version records it (State.Carrier). Zero: none.
	Carrier uint64

	// OnStep, when set, hears of every step the transition goes through.
	OnStep func(StepRecord)

	// StoreLimit, when positive, makes the transition measure the encoded
	// state after each step. The step that takes it past StoreLimit bytes
	// fails with StateTooLarge (which no catch takes) and its writes are
	// undone; an action's output that does not fit is dropped, and the
	// action still counts as completed, so it is compensated. The
	// coordinator sets it to replay a transition whose result it could not
	// store, so that the saga fails in a state that can be stored.
	StoreLimit int
	// OffloadBytes, when positive, says that the engine keeps values
	// larger than this many bytes as objects (offload.go): the state is
	// measured with references in their place, and an expression's result
	// may be as large as an object (MaxValueBytes). Zero: every value is
	// inline, as the state limit allows.
	OffloadBytes int
}

// StepOutcome says how a step ended within a transition.
type StepOutcome string

const (
	OutcomeStarted            StepOutcome = "started"             // an action is now pending
	OutcomeWaiting            StepOutcome = "waiting"             // a wait step's timer is set: the saga waits
	OutcomeCompleted          StepOutcome = "completed"           // the step succeeded
	OutcomeRetrying           StepOutcome = "retrying"            // the action failed and will run again
	OutcomeFailed             StepOutcome = "failed"              // the step failed for good
	OutcomeCaught             StepOutcome = "caught"              // it failed, and a catch routed it
	OutcomeCompensated        StepOutcome = "compensated"         // its compensation succeeded
	OutcomeCompensationFailed StepOutcome = "compensation_failed" // its compensation failed for good: the saga is parked
	OutcomeSkipped            StepOutcome = "skipped"             // an operator undid it by hand (resume --skip)
)

// StepRecord tells an observer about one step of a transition.
type StepRecord struct {
	Step         string        // the step's id
	Kind         lang.StepKind // the step's kind
	Outcome      StepOutcome   // how it ended
	Attempt      int           // the attempt that started or ended, from 1; 1 for pure steps, 0 for OutcomeSkipped
	Compensation bool          // the record is of the step's compensation, not of the step
	Delay        time.Duration // before the retry, for OutcomeRetrying
	Error        *StepError    // for failures
}
