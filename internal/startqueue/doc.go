// Package startqueue reads the start queue: one SQS queue of JSON requests
// that any service sends with a plain SendMessage, in any language, to
// start a deployed saga by name, signal one (a signal with a start beside
// it starts the saga first if it does not exist), or complete or fail a
// callback token. docs/START_QUEUE.md is the contract, request.schema.json
// its JSON Schema.
//
// Every request is idempotent: a start by its saga id, a signal by its
// delivery id (the SQS message id when it gives none), a completion by its
// token. A request that can never be carried out (malformed, an unknown
// saga name, a start of an existing id with another input, an input the
// definition refuses) is refused: sent to the start queue's dead-letter
// queue with the reason in its message attributes, logged and counted,
// never dropped. One that fails for now comes back.
package startqueue
