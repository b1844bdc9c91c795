package lang

import "time"

// Limits on definitions; a definition over any of them is rejected by validation.
const (
	MaxDefinitionBytes = 256 << 10
	MaxSteps           = 500
	MaxExpressionBytes = 4096
	MaxValueDepth      = 32
	MaxCatchClauses    = 20
	MaxSwitchCases     = 100
	MaxRetryAttempts   = 100
)

// Limits on forks (parallel, foreach and saga steps). MaxSteps counts every
// step of a definition, those in branches and foreach bodies included; a
// child saga is a definition of its own and counts its own.
const (
	// MaxBranches bounds the branches of one parallel step.
	MaxBranches = 20
	// MaxForkDepth bounds how deeply forks nest: a fork at the top level
	// is at depth 1, a fork in its branch or body at depth 2, and a child
	// saga's forks one deeper than its saga step.
	MaxForkDepth = 4
	// MaxConcurrency bounds a foreach's concurrency (its lanes: at most
	// 100 keep its fork record small, docs/PROTOCOL.md).
	MaxConcurrency = 100
	// DefaultConcurrency is a foreach's concurrency when it gives none.
	DefaultConcurrency = 10
	// MaxForeachItems bounds the list a foreach iterates; it is known only
	// when the step runs, so the runtime checks it and fails the step past it.
	MaxForeachItems = 10_000
	// MaxBundleBytes bounds a bundle: a definition with its child sagas,
	// as stored under one hash (a definition without children is its own
	// bundle, bounded by MaxDefinitionBytes already).
	MaxBundleBytes = MaxDefinitionBytes
)

// DefaultAs is the name a foreach body gives its item when the step has no as.
const DefaultAs = "item"

// MaxSagaTimeout bounds a saga's timeout, as Step Functions and Lambda
// durable functions bound an execution: one year.
const MaxSagaTimeout = 365 * 24 * time.Hour

// MaxWait bounds a wait step's for: and how far ahead its until: may
// lie: one year, as the saga's timeout. A saga with a timeout waits no
// longer than it.
const MaxWait = MaxSagaTimeout

// Limits on what a saga receives from outside: signals and callback
// completions. A payload (a signal's, or a callback's output) is JSON of
// at most MaxSignalBytes. A saga keeps at most MaxKeptSignals signals (and
// early callback completions) that arrive before it waits for them, of at
// most MaxKeptSignalBytes in all; past either, the sender gets an error.
const (
	MaxSignalBytes     = 32 << 10
	MaxKeptSignals     = 16
	MaxKeptSignalBytes = 64 << 10
)
