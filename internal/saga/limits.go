package saga

import (
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// Limits that more than one part of the engine enforces. Each is defined
// once here, so a check and the code that relies on it cannot disagree.

// MaxDataDepth is how deeply data values (inputs, action outputs, vars, CEL
// results) may nest: a map or list inside another counts one level. The
// value check and the state codec both count from the value itself, so a
// value CheckValue accepts can always be encoded.
const MaxDataDepth = 64

// ResultReserve is the time an invocation keeps after an action for writing
// its outcome and sending the next message: an action's context ends this
// long before the invocation's deadline.
const ResultReserve = 2 * time.Second

// StartReserve is what a fresh invocation may spend before an attempt
// starts (loading the saga and its plan). A record whose step timeout fits
// a fresh invocation with it is handed back, not cut short, when a batch
// leaves it too little time.
const StartReserve = time.Second

// StepTimeoutLimit is the longest step timeout a function whose timeout is
// functionTimeout can give an action: its timeout less StartReserve and
// ResultReserve, so that a fresh invocation always has the whole step
// timeout for it. Zero or negative when the function cannot run an action.
func StepTimeoutLimit(functionTimeout time.Duration) time.Duration {
	return functionTimeout - StartReserve - ResultReserve
}

// MaxErrorMessageBytes bounds the message of a failure kept in state: a
// longer one is cut, so an action's error cannot grow the state.
const MaxErrorMessageBytes = 1024

// DefaultMaxVisits bounds the action visits one saga may make (Options),
// so a loop through a catch cannot run forever.
const DefaultMaxVisits = 10_000

// MaxStateBytes bounds one saga's encoded state, well under DynamoDB's
// 400 KB item limit: a transition that would exceed it fails its step
// (StateTooLarge) and the saga compensates.
const MaxStateBytes = 300 << 10

// maxSettledStateBytes bounds the state of a saga that failed and no longer
// runs forward (compensating, compensated or parked). The room it leaves
// over MaxStateBytes keeps the failure, and the output of an action that
// took the state past MaxStateBytes when it fits, so that its compensation
// can read it. An item stays within DynamoDB's 400 KB (store/dynamo writes
// at most 390 KB with its other attributes).
const maxSettledStateBytes = durable.MaxRecordStateBytes
