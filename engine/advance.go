package engine

import (
	"fmt"
	"slices"
	"time"
)

// EventKind is what happened to a saga.
type EventKind uint8

const (
	// EventStart begins a new saga: State must be zero but for nothing.
	EventStart EventKind = iota + 1
	// EventResult reports the outcome of the pending action or compensation.
	EventResult
	// EventCancel asks a running saga to stop and compensate.
	EventCancel
	// EventResume continues a saga parked in compensation_failed.
	EventResume
)

func (k EventKind) String() string {
	switch k {
	case EventStart:
		return "start"
	case EventResult:
		return "result"
	case EventCancel:
		return "cancel"
	case EventResume:
		return "resume"
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is the input of one transition. Time and randomness come in with
// it, so Advance stays a pure function.
type Event struct {
	Kind EventKind
	Now  time.Time
	// Rand is a draw in [0, 1) from the caller's random source, for jitter.
	Rand float64

	SagaID string         // EventStart
	Input  map[string]any // EventStart: checked with Plan.CheckInput first

	Output any   // EventResult: the action's output, made of plain values (CheckValue)
	Err    error // EventResult: the action's error, nil on success

	// OnStep, when set, hears of every step the transition goes through.
	OnStep func(StepRecord)
}

// StepOutcome says how a step ended within a transition.
type StepOutcome string

const (
	OutcomeStarted            StepOutcome = "started"   // an action is now pending
	OutcomeCompleted          StepOutcome = "completed" // the step succeeded
	OutcomeRetrying           StepOutcome = "retrying"  // the action failed and will run again
	OutcomeFailed             StepOutcome = "failed"    // the step failed for good
	OutcomeCaught             StepOutcome = "caught"    // it failed, and a catch routed it
	OutcomeCompensated        StepOutcome = "compensated"
	OutcomeCompensationFailed StepOutcome = "compensation_failed"
)

// StepRecord tells an observer about one step of a transition.
type StepRecord struct {
	Step         string
	Kind         StepKind
	Outcome      StepOutcome
	Attempt      int
	Compensation bool
	Delay        time.Duration // before the retry, for OutcomeRetrying
	Error        *StepError    // for failures
}

// Result is what a transition produces besides the new state.
type Result struct {
	// Messages is the outbox the caller must send once the state is written;
	// the same slice as the new state's Outbox.
	Messages []Message
}

// Advance applies ev to st and returns the messages to send. st is updated
// in place to the next version: Version goes up by one, and the caller
// writes it conditionally on the old version. Advance does no I/O and reads
// no clock or random source but those in ev. On error st is unchanged.
func (p *Plan) Advance(st *State, ev Event) (Result, error) {
	if err := p.admit(st, ev); err != nil {
		return Result{}, err
	}
	r := runner{p: p, st: st, ev: ev}
	st.Outbox = st.Outbox[:0]
	st.Version++
	st.UpdatedAt = ev.Now
	switch ev.Kind {
	case EventStart:
		st.SagaID, st.Name, st.DefinitionHash = ev.SagaID, p.def.Name, p.hash
		st.Input = ev.Input
		st.Vars = make(map[string]any)
		st.Status = StatusRunning
		st.CreatedAt = ev.Now
		if p.def.Timeout > 0 {
			st.Deadline = ev.Now.Add(p.def.Timeout)
		}
		r.run(0)
	case EventResult:
		if st.Cursors[0].Compensating {
			r.compensationResult()
		} else {
			r.actionResult()
		}
	case EventCancel:
		st.Cursors = st.Cursors[:0]
		r.compensate(&StepError{Type: ErrorTypeCancelled, Message: "saga cancelled"})
	case EventResume:
		st.CompensationError = nil
		st.Status = StatusCompensating
		r.nextCompensation()
	}
	return Result{Messages: st.Outbox}, nil
}

// admit checks that ev applies to st before anything changes.
func (p *Plan) admit(st *State, ev Event) error {
	if st.DefinitionHash != "" && st.DefinitionHash != p.hash {
		return fmt.Errorf("%w: saga %s runs definition %s, not %s", ErrInvalidEvent, st.SagaID, st.DefinitionHash, p.hash)
	}
	switch ev.Kind {
	case EventStart:
		if st.Version != 0 || st.Status != "" {
			return fmt.Errorf("%w: saga %s has already started", ErrInvalidEvent, st.SagaID)
		}
		if ev.SagaID == "" {
			return fmt.Errorf("%w: start needs a saga id", ErrInvalidEvent)
		}
	case EventResult:
		if len(st.Cursors) == 0 || (st.Status != StatusRunning && st.Status != StatusCompensating) {
			return fmt.Errorf("%w: saga %s (%s) waits for no action", ErrInvalidEvent, st.SagaID, st.Status)
		}
	case EventCancel:
		if st.Status != StatusRunning && st.Status != StatusWaiting {
			return fmt.Errorf("%w: saga %s is %s and cannot be cancelled", ErrInvalidEvent, st.SagaID, st.Status)
		}
	case EventResume:
		if st.Status != StatusCompensationFailed {
			return fmt.Errorf("%w: saga %s is %s; only compensation_failed sagas resume", ErrInvalidEvent, st.SagaID, st.Status)
		}
	default:
		return fmt.Errorf("%w: unknown event kind %d", ErrInvalidEvent, ev.Kind)
	}
	return nil
}

// runner carries one transition.
type runner struct {
	p   *Plan
	st  *State
	ev  Event
	act activation
}

func (r *runner) record(rec StepRecord) {
	if r.ev.OnStep != nil {
		r.ev.OnStep(rec)
	}
}

func (r *runner) activation(vars map[string]any, attempt int) *activation {
	r.act = activation{st: r.st, vars: vars, attempt: int64(attempt), now: r.ev.Now}
	return &r.act
}

// run executes steps from idx inline until an action, the end, or a failure.
func (r *runner) run(idx int) {
	st, p := r.st, r.p
	for n := 0; ; n++ {
		if idx == end {
			r.succeed(st.Vars)
			return
		}
		if !st.Deadline.IsZero() && !r.ev.Now.Before(st.Deadline) {
			r.compensate(&StepError{Step: p.steps[idx].ID, Type: ErrorTypeDeadline, Message: fmt.Sprintf("saga deadline %s passed", st.Deadline.UTC().Format(time.RFC3339))})
			return
		}
		s := p.steps[idx]
		if n >= p.opts.MaxInlineSteps {
			r.stepFailed(s, 1, &StepError{Step: s.ID, Type: ErrorTypeStepLimit, Message: fmt.Sprintf("ran %d steps in one transition without an action", n)})
			return
		}
		switch s.Kind {
		case KindAction:
			st.Seq++
			st.Cursors = append(st.Cursors[:0], Cursor{Step: idx, Attempt: 1, Seq: st.Seq})
			st.Status = StatusRunning
			r.send(QueueAdvance, s.ID, 1, 0)
			r.record(StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeStarted, Attempt: 1})
			return
		case KindSet:
			for _, a := range s.set {
				v, err := a.val.eval(r.activation(st.Vars, 1))
				if err != nil {
					r.stepFailed(s, 1, exprError(s.ID, err))
					return
				}
				st.Vars[a.name] = v
			}
			idx = s.next
		case KindSwitch:
			next, err := r.choose(s)
			if err != nil {
				r.stepFailed(s, 1, exprError(s.ID, err))
				return
			}
			idx = next
		case KindAssert:
			ok, err := r.holds(s.assert)
			if err != nil {
				r.stepFailed(s, 1, exprError(s.ID, err))
				return
			}
			if !ok {
				msg := s.Assert.Message
				if msg == "" {
					msg = "assertion failed: " + s.Assert.If
				}
				if next, caught := r.caught(s, 1, &StepError{Step: s.ID, Type: s.Assert.Error, Message: msg}); caught {
					idx = next
					continue
				}
				return
			}
			idx = s.next
		case KindFail:
			msg := s.Fail.Message
			if msg == "" {
				msg = "the saga reached fail step " + s.ID
			}
			err := &StepError{Step: s.ID, Type: s.Fail.Error, Message: msg}
			r.record(StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeFailed, Attempt: 1, Error: err})
			r.compensate(err)
			return
		case KindSucceed:
			var out any = st.Vars
			if s.succeed != nil {
				v, err := s.succeed.eval(r.activation(st.Vars, 1))
				if err != nil {
					r.stepFailed(s, 1, exprError(s.ID, err))
					return
				}
				out = v
			}
			r.record(StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompleted, Attempt: 1})
			r.succeed(out)
			return
		}
		r.record(StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompleted, Attempt: 1})
	}
}

func (r *runner) choose(s *planStep) (int, error) {
	for _, c := range s.cases {
		if c.cond == nil {
			return c.next, nil
		}
		ok, err := r.holds(c.cond)
		if err != nil {
			return 0, err
		}
		if ok {
			return c.next, nil
		}
	}
	return s.next, nil
}

func (r *runner) holds(prg *program) (bool, error) {
	v, err := prg.eval(r.activation(r.st.Vars, 1))
	if err != nil {
		return false, err
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, &ActionError{Type: ErrorTypeExpression, Message: fmt.Sprintf("${%s} is %v, not a bool", prg.src, v.Value())}
	}
	return b, nil
}

func exprError(step string, err error) *StepError {
	return &StepError{Step: step, Type: ErrorType(err), Message: errorMessage(err)}
}

func (r *runner) succeed(out any) {
	st := r.st
	st.Status = StatusSucceeded
	st.Output = out
	st.Cursors = st.Cursors[:0]
}

func (r *runner) send(q QueueName, step string, attempt int, delay time.Duration) {
	r.st.Outbox = append(r.st.Outbox, Message{SagaID: r.st.SagaID, Version: r.st.Version, Queue: q, Step: step, Attempt: attempt, Delay: delay})
}

// stepFailed handles a step failing for good: a catch routes it, or the saga compensates.
func (r *runner) stepFailed(s *planStep, attempt int, err *StepError) {
	if next, caught := r.caught(s, attempt, err); caught {
		r.run(next)
	}
}

// caught records a failure and reports whether a catch clause takes it;
// if none does, the saga starts compensating.
func (r *runner) caught(s *planStep, attempt int, err *StepError) (int, bool) {
	for _, c := range s.catch {
		if slices.Contains(c.errors, err.Type) || slices.Contains(c.errors, "*") {
			r.record(StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCaught, Attempt: attempt, Error: err})
			return c.next, true
		}
	}
	r.record(StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeFailed, Attempt: attempt, Error: err})
	r.compensate(err)
	return 0, false
}

func (r *runner) actionResult() {
	st, ev := r.st, r.ev
	cur := st.Cursors[0]
	s := r.p.steps[cur.Step]
	if ev.Err == nil {
		out, err := CheckValue(ev.Output)
		if err != nil {
			r.actionFailed(s, cur, Permanent(&ActionError{Type: ErrorTypeOutputFormat, Message: "action output: " + err.Error()}))
			return
		}
		if s.Out != "" {
			st.Vars[s.Out] = out
		}
		if s.comp != nil {
			c := Completion{Step: cur.Step, Seq: cur.Seq}
			if s.inLoop && s.Out != "" {
				c.Out, c.HasOut = out, true
			}
			st.Stack = append(st.Stack, c)
		}
		st.Cursors = st.Cursors[:0]
		r.record(StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompleted, Attempt: cur.Attempt})
		r.run(s.next)
		return
	}
	r.actionFailed(s, cur, ev.Err)
}

func (r *runner) actionFailed(s *planStep, cur Cursor, err error) {
	st := r.st
	typ := ErrorType(err)
	se := &StepError{Step: s.ID, Type: typ, Message: errorMessage(err)}
	if r.retryable(s.retry, cur.Attempt, err, typ) {
		r.retry(s, s.retry, cur, QueueAdvance, false, se)
		return
	}
	st.Cursors = st.Cursors[:0]
	r.stepFailed(s, cur.Attempt, se)
}

func (r *runner) retryable(pol RetryPolicy, attempt int, err error, typ string) bool {
	return !IsPermanent(err) && !slices.Contains(pol.Permanent, typ) && attempt < pol.Attempts
}

func (r *runner) retry(s *planStep, pol RetryPolicy, cur Cursor, q QueueName, comp bool, se *StepError) {
	cur.Attempt++
	d := Backoff(pol, cur.Attempt, r.ev.Rand)
	r.st.Cursors[0] = cur
	r.send(q, s.ID, cur.Attempt, d)
	r.record(StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeRetrying, Attempt: cur.Attempt - 1, Compensation: comp, Delay: d, Error: se})
}

// Backoff is the delay before attempt (2 or more) under pol: backoff
// doubling per attempt, capped at max_backoff, and with jitter drawn from
// rand in [0, 1) spread over the upper half, so a retry is never immediate.
func Backoff(pol RetryPolicy, attempt int, rand float64) time.Duration {
	d := pol.Backoff
	maxD := pol.MaxBackoff
	if maxD <= 0 || maxD > MaxDelay {
		maxD = MaxDelay
	}
	for i := 2; i < attempt && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	if pol.Jitter && d > 1 {
		half := d / 2
		d = half + time.Duration(float64(d-half)*min(max(rand, 0), 1))
	}
	return d
}

// compensate starts undoing the completed steps, newest first.
func (r *runner) compensate(cause *StepError) {
	st := r.st
	st.Failure = cause
	st.Status = StatusCompensating
	st.Cursors = st.Cursors[:0]
	r.nextCompensation()
}

func (r *runner) nextCompensation() {
	st := r.st
	if len(st.Stack) == 0 {
		st.Status = StatusCompensated
		st.Cursors = st.Cursors[:0]
		return
	}
	top := st.Stack[len(st.Stack)-1]
	st.Cursors = append(st.Cursors[:0], Cursor{Step: top.Step, Attempt: 1, Seq: top.Seq, Compensating: true})
	r.send(QueueCompensate, r.p.steps[top.Step].ID, 1, 0)
}

func (r *runner) compensationResult() {
	st, ev := r.st, r.ev
	cur := st.Cursors[0]
	s := r.p.steps[cur.Step]
	if ev.Err == nil {
		st.Stack = st.Stack[:len(st.Stack)-1]
		r.record(StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompensated, Attempt: cur.Attempt, Compensation: true})
		r.nextCompensation()
		return
	}
	typ := ErrorType(ev.Err)
	se := &StepError{Step: s.ID, Type: typ, Message: errorMessage(ev.Err)}
	if r.retryable(s.comp.retry, cur.Attempt, ev.Err, typ) {
		r.retry(s, s.comp.retry, cur, QueueCompensate, true, se)
		return
	}
	st.Status = StatusCompensationFailed
	st.CompensationError = se
	st.Cursors = st.Cursors[:0]
	r.record(StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompensationFailed, Attempt: cur.Attempt, Compensation: true, Error: se})
}
