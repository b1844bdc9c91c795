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
