// Package engine is lambdasaga's runtime and the entry point for programs
// that run sagas: the Coordinator starts, cancels and resumes sagas and
// handles their queue messages (load, run the action, advance, one
// conditional write, send), the Registry maps action names to Go functions,
// RunWorker consumes a queue in process, and Sweep redrives sagas whose
// messages were lost.
//
// It drives plans compiled by package saga (which holds the pure state
// machine) against any durable.Store and durable.Queue; docs/PROTOCOL.md is
// the protocol it keeps. It knows nothing of AWS: the adapters in store/
// and queue/ implement package durable, and the Lambda functions and
// sagactl wire them together.
//
// It imports durable, lang and saga, and nothing of AWS (internal/layout
// checks it).
package engine
