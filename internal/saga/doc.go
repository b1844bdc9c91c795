// Package saga compiles saga definitions into plans and runs them as a pure
// state machine: no I/O, no clock, no randomness of its own.
//
// Compile checks a definition (package lang parses it) against its declared
// input, compiles every CEL expression once, and builds the step graph into
// a Plan, safe for concurrent use. A saga run is a State; Plan.Advance
// applies an Event (a start, an action's result, a cancel, a resume) to a
// State, making its next version in place, with the messages that version
// must send in its Outbox, so every transition is table-testable. State has its own compact binary encoding
// (State.MarshalBinary, State.Record), and Plan.Call says which action a
// pending State waits on, with its arguments and idempotency key.
//
// Package engine drives plans against a store and a queue; package durable
// is the contract those implement; docs/PROTOCOL.md says how a transition
// is made durable.
//
// It imports durable, lang and cel-go, never the runtime (engine) or
// anything of AWS (internal/layout checks it).
package saga
