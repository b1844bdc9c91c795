// Package proptest checks the promise "what validation accepts must run"
// (docs/RELIABILITY.md, "What validation accepts must run"): it generates saga definitions, inputs and
// action behaviours from a seeded random source (or a fuzzer's bytes), and
// for every definition saga.Compile accepts and every input Start accepts
// it runs the saga on the memory store and queue and checks that
//
//   - no panic escapes the engine (Compile, Start, Handle, Cancel, Resume);
//   - Start either starts the saga or refuses its input with ErrInvalidInput;
//   - the saga reaches a final status (succeeded, compensated,
//     compensation_failed) within a bounded number of handled messages, and
//     no message reaches a dead-letter queue;
//   - when it ends compensated, every action call that returned success on a
//     step that declares compensate was compensated (its compensation
//     returned success for the same saga, step and visit); no compensation
//     runs for a visit whose action never returned success, and a saga that
//     succeeded ran no compensation.
//
// The fault model is the users' side: definitions with every step kind,
// catch loops and backward jumps, odd expressions, inputs at and past the
// limits, and actions that echo, return outputs too large or too deep to
// store, fail (retryably, permanently, with a 1 MB message), panic, run past
// their step timeout, or see the saga cancelled while they run.
package proptest
