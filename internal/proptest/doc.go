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
//   - every signal and callback completion the driver sends gets the answer
//     the oracle (deliver.go) predicts from the saga read before it:
//     applied (the version moves by one), kept (the version stays, one
//     more received), duplicate, or the error it names, and nothing else
//     changes; a pause the driver lets time out fails the saga at its
//     await unless a catch takes Timeout;
//   - in the final (or waiting) state the kept signals of each name are the
//     last ones taken, in order, and an await's var holds the one taken
//     before them; a callback step's var holds its action's output or the
//     completion that replaced it; compensations ran newest visit first.
//   - before every chained step (docs/PROTOCOL.md, "Chains"), the state
//     the chain holds is the state a read gives (held.go): the store is at
//     its version, the two are equal field by field (times by instant and
//     text, nil against empty in values), and the step goes the same way
//     from each: the same call, and for a success, an echo, a retryable
//     and a permanent failure and a timeout, the same encoded state,
//     outbox and step records.
//
// A fifth of the definitions have forks (gen_fork.go): parallel steps,
// foreach steps over the input's list or a literal one (empty, small, or
// one past the limit), child sagas read from a bundle (CompileFile over
// an fstest.MapFS), nested to depth 2 or 3, their lists holding the same
// step kinds; a quarter of them carry one mistake validation must refuse
// with a file and a line (a branch reading another's var, a next leaving
// its list, a child step id that is the parent's, a child saga cycle).
// Signals to such a saga are routed through its tree, so the oracle does
// not predict their receipts: tree.go checks weaker properties (taken at
// most once, a refusal changes no run, a kept signal is never lost) and
// the tree's end (every run final, a fork joins once, a run that ends
// compensated compensated its successes, and all of them when the saga
// did, the children of a fork undone highest index first).
//
// A saga may end waiting when its case gives the driver few pauses to end.
//
// The fault model is the users' side: definitions with every step kind,
// catch loops and backward jumps, odd expressions, inputs at and past the
// limits, and actions that echo, return outputs too large or too deep to
// store, fail (retryably, permanently, with a 1 MB message), panic, run past
// their step timeout, or see the saga cancelled while they run; awaits
// (with and without catch, timeouts within and past the 15 minutes of a
// delayed message) and callback steps whose action completes or fails its
// own token while it runs (twice, sometimes); a driver that sends signals
// while the saga runs, and ends each pause with the signal, another
// signal, a completion or failure of the token (repeated, stale or
// forged sometimes), or its timer.
package proptest
