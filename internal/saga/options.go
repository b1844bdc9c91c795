package saga

import "time"

// Options tune compilation. The zero value takes the defaults.
type Options struct {
	// CostLimit bounds the work of one expression evaluation (CEL cost units).
	CostLimit uint64
	// EvalTimeout bounds the wall time of one tracked expression evaluation,
	// checked between comprehension iterations (CEL's interrupt checks).
	EvalTimeout time.Duration
	// MaxInlineSteps bounds the pure steps one transition may run before the
	// saga fails with StepLimitExceeded.
	MaxInlineSteps int
	// MaxVisits bounds the action visits of one saga; past it the step fails
	// with VisitLimitExceeded. Default DefaultMaxVisits.
	MaxVisits int
	// MaxStepTimeout, when positive, is the longest step timeout (action or
	// compensation) Compile accepts: what the function that runs the
	// actions can give one, its timeout less StartReserve and ResultReserve
	// (StepTimeoutLimit). Zero: only the 15-minute cap applies.
	MaxStepTimeout time.Duration
	// HistoryBytes bounds the history each saga keeps in its state
	// (State.History): past it the oldest transitions are dropped and
	// counted. Zero: DefaultHistoryBytes; negative: keep no history. At
	// least 256 and at most MaxHistoryBytes.
	HistoryBytes int
}

func (o Options) withDefaults() Options {
	if o.CostLimit == 0 {
		o.CostLimit = DefaultCostLimit
	}
	if o.EvalTimeout == 0 {
		o.EvalTimeout = DefaultEvalTimeout
	}
	if o.MaxInlineSteps == 0 {
		o.MaxInlineSteps = 10_000
	}
	if o.MaxVisits == 0 {
		o.MaxVisits = DefaultMaxVisits
	}
	switch {
	case o.HistoryBytes == 0:
		o.HistoryBytes = DefaultHistoryBytes
	case o.HistoryBytes < 0:
		o.HistoryBytes = -1
	default:
		o.HistoryBytes = min(max(o.HistoryBytes, 256), MaxHistoryBytes)
	}
	return o
}
