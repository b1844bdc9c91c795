package engine

import "errors"

// Sentinel errors of the runtime. Callers test for them with errors.Is.
var (
	// ErrNoActions: Handle was called on a coordinator built without
	// Actions; the message is left for one that has them.
	ErrNoActions = errors.New("this coordinator has no actions to run: it cannot handle messages")
	// ErrDamagedState: a stored state does not fit its definition (a cursor
	// past the plan, say); the message that found it cannot be handled.
	ErrDamagedState = errors.New("damaged saga state")
	// ErrNoTime: too little of the invocation was left to run an action and
	// record its outcome; the message is handed back, nothing was done.
	ErrNoTime = errors.New("not enough time left in the invocation")
)
