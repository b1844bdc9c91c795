package saga

import (
	"fmt"
	"slices"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// Advance applies ev to st, in place, making its next version: Version goes
// up by one, and the caller writes st conditionally on the old version. The
// messages the transition sends are st.Outbox: the caller sends them once
// st is written, and since they are part of the state, a crash between the
// write and the send loses none (the next delivery sends them again).
// Advance does no I/O and reads no clock or random source but those in ev.
// On error st is unchanged.
func (p *Plan) Advance(st *State, ev Event) error {
	if err := p.admit(st, ev); err != nil {
		return err
	}
	r := runner{p: p, st: st, ev: ev, was: st.Status, since: st.StatusSince}
	r.hist.begin(st, p.opts.HistoryBytes)
	var retryDue time.Time
	retryWaits := false
	if ev.Kind == EventCancel {
		retryDue, retryWaits = pendingRetryDue(st) // before the outbox is reset
	}
	st.Outbox = st.Outbox[:0]
	st.Joined, st.Undid = 0, 0
	st.Version++
	st.UpdatedAt = ev.Now
	st.FromOutside = fromOutside(ev.Kind)
	switch ev.Kind {
	case EventResult:
		st.Carrier = ev.Carrier
	case EventCancel:
		// A cancel that lands in a chain keeps its carrier: the attempt it
		// waits for had no message of its own, and the carrier, back after
		// a crash, runs it.
	default:
		st.Carrier = 0
	}
	switch ev.Kind {
	case EventStart:
		r.start()
	case EventResult:
		if st.Cursors[0].Compensating {
			r.compensationResult()
		} else {
			r.actionResult()
		}
	case EventCancel:
		r.cancel(retryDue, retryWaits)
	case EventTimer:
		r.timerFired()
	case EventSignal:
		r.signalReceived()
	case EventCallback:
		r.callbackCompleted()
	case EventJoin:
		r.joined(ev.Join)
	case EventUndo:
		r.undoForParent()
	case EventUndone:
		r.childUndone(ev.Undone)
	case EventResume:
		r.resume()
	case EventRetry:
		r.retryHeld()
	case EventCompensate:
		r.compensateHeld()
	}
	r.markStatusSince() // before the last measure: it is part of the state
	if ev.StoreLimit > 0 {
		r.keepWithinStoreLimit()
	}
	if st.Status != r.was {
		r.sendEnded()
	}
	status := st.Status
	if status == r.was {
		status = "" // kept
	}
	r.hist.end(st.Version, ev.Now, ev.Kind, status)
	return nil
}

// start begins the saga (EventStart): its identity, input and deadline,
// then its first step, or, for a child run, the step its fork gave it.
func (r *runner) start() {
	st, p, ev := r.st, r.p, &r.ev
	st.SagaID, st.Name, st.DefinitionHash = ev.SagaID, p.def.Name, p.hash
	st.Input = ev.Input
	st.Vars = make(map[string]any)
	st.Status = durable.StatusRunning
	st.CreatedAt = ev.Now
	if p.def.Timeout > 0 {
		st.Deadline = ev.Now.Add(p.def.Timeout)
	}
	if p.HasCallbacks() {
		st.Secret = append([]byte(nil), ev.Secret...)
	}
	if ev.Child != nil {
		r.startChild(ev.Child)
		return
	}
	r.run(0)
}

// cancel cancels the saga (EventCancel), by what is pending: a retry
// still waiting out its backoff is dropped and the saga compensates; a
// fork's children are stopped (or their undo goes on) and the join
// compensates; an action that may be running is awaited; anything else
// compensates at once. retryDue and retryWaits are pendingRetryDue's,
// read before the outbox was reset.
func (r *runner) cancel(retryDue time.Time, retryWaits bool) {
	st, p := r.st, r.p
	if st.Status == durable.StatusHeld {
		// Nothing runs while a saga is held: it compensates at once.
		st.Cursors = st.Cursors[:0]
		r.compensate(cancelled())
		return
	}
	if retryWaits && r.ev.Now.Add(clockSkew).Before(retryDue) {
		// The pending attempt waits out its backoff: no one can be
		// running it yet, so nothing is in flight to wait for. The
		// attempt before it failed; if it ran into its deadline, it
		// may have taken effect, and compensating finds it out.
		cur := st.Cursors[0]
		r.unknownOutcome(p.steps[cur.Step], cur, cur.Attempt-1)
		st.Cursors = st.Cursors[:0]
		r.compensate(cancelled())
		return
	}
	if cur, ok := st.Pending(); ok && cur.Fork {
		// Children run: they are stopped (a fork waited on) or go on
		// being undone (a fork that failed); the join, or the last
		// undo, compensates.
		st.CancelRequested = true
		if !cur.Compensating {
			r.stopFork(cur)
		} else {
			// A failed fork's undo: the undo of the child being undone,
			// in the outbox this write replaces, may never have been
			// sent (a crash after the join's write). Again: a child's
			// undo is idempotent.
			s := p.steps[cur.Step]
			st.Outbox = append(st.Outbox, durable.Message{SagaID: durable.ChildID(st.SagaID, s.ID, cur.Seq, cur.Child), Version: st.Version, Queue: durable.QueueCompensate, Kind: durable.KindUndo, Step: s.ID, Attempt: 1})
		}
		return
	}
	if cur, ok := st.Pending(); ok && !cur.Compensating && st.Status == durable.StatusRunning {
		// The pending action may be running now, and may take effect:
		// wait for its outcome, then compensate it with the rest. The
		// message in flight (of the version before) still runs it: the
		// coordinator takes it for this version's. A copy at this
		// version goes out only as a fallback, delayed as long as a
		// queue allows, so that no second worker runs the action beside
		// the one running it now.
		st.CancelRequested = true
		r.send(durable.QueueAdvance, p.steps[cur.Step].ID, cur.Attempt, durable.MaxDelay)
		return
	}
	st.Cursors = st.Cursors[:0]
	r.compensate(cancelled())
}

// PausedMayHaveRun ends the error of a forward attempt that a pause held
// when the saga's deadline or a cancel stopped waiting for it: not run by
// that delivery, but a delivery before the pause may have run it (a worker
// that died before writing). Found out if the step has a compensation;
// otherwise its effect, if any, is never recorded (docs/PROTOCOL.md,
// "Pauses").
const PausedMayHaveRun = "was paused; it may have run before the pause"

// timerFired handles the saga's timer (EventTimer): the saga's deadline
// (a fork's children stop; an action or a wait fails and the saga
// compensates), or the end of a wait, an await's timeout or a callback's.
func (r *runner) timerFired() {
	st, p := r.st, r.p
	cur := st.Cursors[0]
	s := p.steps[cur.Step]
	if cur.Held {
		r.holdEnded(s)
		return
	}
	if cur.Fork {
		// The deadline passed while the children ran: they stop, and
		// the join compensates.
		st.Failure = &StepError{Step: s.ID, Type: lang.ErrorTypeDeadline, Message: fmt.Sprintf("saga deadline %s passed while %s's children ran", st.Deadline.UTC().Format(time.RFC3339), s.ID)}
		r.stopFork(cur)
		return
	}
	st.Cursors = st.Cursors[:0]
	if !st.Deadline.IsZero() && !r.ev.Now.Before(st.Deadline) {
		what := "while it waited"
		switch {
		case r.ev.Deferred:
			what = fmt.Sprintf("while attempt %d of %s %s", cur.Attempt, s.ID, PausedMayHaveRun)
		case !cur.Wait:
			what = fmt.Sprintf("before attempt %d of %s", cur.Attempt, s.ID)
		}
		err := &StepError{Step: s.ID, Type: lang.ErrorTypeDeadline, Message: fmt.Sprintf("saga deadline %s passed %s", st.Deadline.UTC().Format(time.RFC3339), what)}
		r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeFailed, Attempt: cur.Attempt, Error: err})
		if !cur.Wait {
			attempts := cur.Attempt - 1
			if r.ev.Deferred {
				// Held by a pause, this attempt did not run here; a
				// delivery before the pause may have run it (a worker that
				// died before writing): found out, as a timed-out one.
				cur.Unknown, attempts = true, cur.Attempt
			}
			r.unknownOutcome(s, cur, attempts)
		}
		r.compensate(err)
		return
	}
	st.Status = durable.StatusRunning
	switch {
	case s.Kind == lang.KindAwait:
		r.stepFailed(s, 1, &StepError{Step: s.ID, Type: lang.ErrorTypeTimeout, Message: fmt.Sprintf("no signal %s within %s", s.Await.Signal, lang.FormatDuration(awaitTimeout(s)))})
	case s.Callback != nil:
		r.callbackResult(s, cur, Delivery{Err: &StepError{Type: lang.ErrorTypeTimeout, Message: fmt.Sprintf("callback token of attempt %d not completed within %s", cur.Attempt, lang.FormatDuration(callbackTimeout(s)))}})
	default:
		r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompleted, Attempt: 1})
		r.run(s.nextIndex)
	}
}

// signalReceived completes the await the saga waits on with the signal
// (EventSignal), and goes on.
func (r *runner) signalReceived() {
	st := r.st
	cur := st.Cursors[0]
	st.Cursors = st.Cursors[:0]
	st.Status = durable.StatusRunning
	s := r.p.steps[cur.Step]
	remember(st, r.ev.Delivery.ID)
	r.received(s, r.ev.Delivery.Payload)
}

// callbackCompleted ends the callback attempt the saga waits on with its
// token's completion (EventCallback).
func (r *runner) callbackCompleted() {
	st := r.st
	cur := st.Cursors[0]
	st.Status = durable.StatusRunning
	s := r.p.steps[cur.Step]
	remember(st, r.ev.Delivery.ID)
	r.callbackResult(s, cur, r.ev.Delivery)
}

// undoForParent starts compensating a child run that succeeded, because
// its parent compensates (EventUndo).
func (r *runner) undoForParent() {
	st := r.st
	st.Undoing = true
	st.Failure = &StepError{Type: lang.ErrorTypeCancelled, Message: "its parent saga " + st.Parent.ID + " compensates"}
	st.Status = durable.StatusCompensating
	r.nextCompensation()
}

// resume goes on compensating a saga whose compensation failed
// (EventResume): the failed compensation runs again, or, with ev.Skip, is
// skipped.
func (r *runner) resume() {
	st, p := r.st, r.p
	if cur, ok := st.Pending(); ok && cur.Fork && cur.Compensating {
		// Parked on a child of a fork: undo it again (its own resume
		// comes first: the coordinator resumes it), or, skipped, go on
		// to the next child.
		st.CompensationError = nil
		st.Status = durable.StatusCompensating
		s := p.steps[cur.Step]
		if cur.Attempt == 2 && r.routed(s, st.Failure) {
			st.Status = durable.StatusRunning // a failed fork's undo whose failure a catch takes
		}
		if r.ev.Skip {
			r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeSkipped, Compensation: true})
			r.childUndone(&Undone{Child: cur.Child})
			return
		}
		r.undoChild(s, cur)
		return
	}
	st.CompensationError = nil
	st.Status = durable.StatusCompensating
	if n := len(st.Stack); r.ev.Skip && n > 0 {
		s := p.steps[st.Stack[n-1].Step]
		st.Stack = st.Stack[:n-1]
		r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeSkipped, Compensation: true})
	}
	r.nextCompensation()
}

// keepWithinStoreLimit undoes what made the state too large to store
// under ev.StoreLimit, once the event is applied.
func (r *runner) keepWithinStoreLimit() {
	st, p, ev := r.st, r.p, &r.ev
	if (st.Status == durable.StatusRunning || st.Status == durable.StatusWaiting) && !r.fits() {
		// Only starting the next action (or wait) is left to blame: undo it.
		step := ""
		if cur, ok := st.Pending(); ok {
			step = p.steps[cur.Step].ID
		}
		st.Outbox = st.Outbox[:0]
		r.compensate(r.tooLarge(step, "starting it"))
		r.markStatusSince()
	}
	if ev.Kind == EventStart && ev.Child != nil && len(st.Stack) == 0 && !r.fits() {
		// A child run too large to store as it starts (an iteration's
		// copied vars and its item): no action of it has run (its stack
		// is empty), so it ends compensated without what made it large,
		// and its fork fails. A failure it already has (the check above,
		// a stopped child's) stays.
		st.Input, st.Vars, st.Scope, st.Cursors = nil, nil, nil, nil
		st.Outbox = st.Outbox[:0]
		if st.Failure == nil {
			st.Failure = newStepError(p.steps[ev.Child.First].ID, lang.ErrorTypeStateTooLarge, fmt.Sprintf("its input, vars and item would take its state past its limit of %d bytes as it starts", ev.StoreLimit))
		}
		st.Status = durable.StatusCompensated
		r.markStatusSince()
	}
}

// sendEnded sends what the end of the saga tells others, when the
// transition changed its status: a child run's end to its parent, and the
// end for good of a root that forked to its tree's expiry.
func (r *runner) sendEnded() {
	st := r.st
	if st.Parent != nil && st.Status.Final() {
		// A child run ended: its fork counts it, or its parent's undo goes on.
		r.send(durable.QueueAdvance, st.Parent.Step, 1, 0)
		st.Outbox[len(st.Outbox)-1].Kind = durable.KindEnded
	}
	if st.Parent == nil && (st.Status == durable.StatusSucceeded || st.Status == durable.StatusCompensated) &&
		(len(st.Forks) > 0 || st.Objects || r.ev.OffloadBytes > 0 && r.hasRefs()) {
		// A root that forked, or kept values as objects, ended for good:
		// its tree and its objects expire with it.
		st.Outbox = append(st.Outbox, durable.Message{SagaID: st.SagaID, Version: st.Version, Queue: durable.QueueAdvance, Kind: durable.KindExpire, Attempt: 1})
	}
}

// markStatusSince sets StatusSince when the transition changed the
// status (or the state had none): the transition's time, or a nanosecond
// after the time before if that clock was behind, so that it only grows: a
// listing's cursor relies on it.
func (r *runner) markStatusSince() {
	st, now := r.st, r.ev.Now
	if st.Status == r.was && !r.since.IsZero() {
		st.StatusSince = r.since
		return
	}
	st.StatusSince = now
	if !r.since.IsZero() && !now.After(r.since) {
		st.StatusSince = r.since.Add(time.Nanosecond)
	}
}

func cancelled() *StepError {
	return &StepError{Type: lang.ErrorTypeCancelled, Message: "saga cancelled"}
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
		if p.HasCallbacks() && len(ev.Secret) < secretBytes {
			return fmt.Errorf("%w: saga %s has callback steps: its start needs a secret of %d random bytes", ErrInvalidEvent, ev.SagaID, secretBytes)
		}
		if ev.SagaID == "" {
			return fmt.Errorf("%w: start needs a saga id", ErrInvalidEvent)
		}
	case EventResult:
		cur, ok := st.Pending()
		if !ok || cur.Fork || (st.Status != durable.StatusRunning && st.Status != durable.StatusCompensating) {
			// A fork's children run its steps; undoing them is a message
			// of theirs: no action's result is the fork's.
			return fmt.Errorf("%w: saga %s (%s) waits for no action", ErrInvalidEvent, st.SagaID, st.Status)
		}
	case EventCancel:
		if st.Status != durable.StatusRunning && st.Status != durable.StatusWaiting && st.Status != durable.StatusHeld {
			return fmt.Errorf("%w: saga %s is %s and cannot be cancelled", ErrInvalidEvent, st.SagaID, st.Status)
		}
	case EventRetry, EventCompensate:
		return p.admitHeld(st, ev)
	case EventSignal, EventCallback:
		cur, ok := st.Pending()
		if !ok || !cur.Wait || st.Status != durable.StatusWaiting || cur.Compensating {
			return fmt.Errorf("%w: saga %s (%s) waits on no %s", ErrInvalidEvent, st.SagaID, st.Status, ev.Kind)
		}
		s := p.steps[cur.Step]
		if ev.Kind == EventSignal && (s.Kind != lang.KindAwait || s.Await.Signal != ev.Delivery.Signal) {
			return fmt.Errorf("%w: saga %s does not await signal %s", ErrInvalidEvent, st.SagaID, ev.Delivery.Signal)
		}
		d := ev.Delivery
		if ev.Kind == EventCallback && (s.Callback == nil || d.Step != cur.Step || d.Seq != cur.Seq || d.Attempt != cur.Attempt) {
			return fmt.Errorf("%w: saga %s does not wait on that callback", ErrInvalidEvent, st.SagaID)
		}
	case EventJoin:
		cur, ok := st.Pending()
		if !ok || !cur.Fork || cur.Compensating || st.Status != durable.StatusWaiting || ev.Join == nil || ev.Join.Version != cur.Version {
			return fmt.Errorf("%w: saga %s (%s) waits on no such fork", ErrInvalidEvent, st.SagaID, st.Status)
		}
		if ev.Join.Failure == nil && len(ev.Join.Outputs) != cur.Children {
			return fmt.Errorf("%w: saga %s's fork has %d children, not %d outputs", ErrInvalidEvent, st.SagaID, cur.Children, len(ev.Join.Outputs))
		}
	case EventUndo:
		if st.Parent == nil || st.Status != durable.StatusSucceeded {
			return fmt.Errorf("%w: saga %s (%s) is no child run that succeeded", ErrInvalidEvent, st.SagaID, st.Status)
		}
	case EventUndone:
		cur, ok := st.Pending()
		if !ok || !cur.Fork || !cur.Compensating || ev.Undone == nil || ev.Undone.Child != cur.Child {
			return fmt.Errorf("%w: saga %s (%s) undoes no such child", ErrInvalidEvent, st.SagaID, st.Status)
		}
	case EventResume:
		if st.Status != durable.StatusCompensationFailed {
			return fmt.Errorf("%w: saga %s is %s; only compensation_failed sagas resume", ErrInvalidEvent, st.SagaID, st.Status)
		}
	case EventTimer:
		wake := st.WakeAt()
		if wake.IsZero() && (st.DeadlinePassed(ev.Now) || ev.Deferred && st.deferredPastDeadline(ev.Now)) {
			break // a forward action pending past the saga's deadline: the deadline fires
		}
		if wake.IsZero() {
			return fmt.Errorf("%w: saga %s (%s) waits on no timer", ErrInvalidEvent, st.SagaID, st.Status)
		}
		if ev.Now.Before(wake) {
			return fmt.Errorf("%w: saga %s's timer is due at %s, not yet at %s", ErrInvalidEvent, st.SagaID, wake.UTC().Format(time.RFC3339Nano), ev.Now.UTC().Format(time.RFC3339Nano))
		}
	default:
		return fmt.Errorf("%w: unknown event kind %d", ErrInvalidEvent, ev.Kind)
	}
	return nil
}

// runner carries one transition.
type runner struct {
	p       *Plan
	st      *State
	ev      Event
	act     activation
	scratch []byte // for measuring the state under ev.StoreLimit
	// was and since are the status and StatusSince before the transition.
	was   durable.Status
	since time.Time
	hist  historyWriter // the transition's entries in the saga's history
	// failing is the attempt of an action step that failed for good in
	// this transition (Attempt zero: none): what a hold keeps.
	failing Cursor
}

// fits reports whether the state, encoded, is within ev.StoreLimit (always
// true without one).
func (r *runner) fits() bool {
	if r.ev.StoreLimit <= 0 {
		return true
	}
	return r.fitsWithin(r.ev.StoreLimit)
}

// settledHeadroom is kept under maxSettledStateBytes for what a failing
// step adds to the state: its failure, the compensation cursor and message.
const settledHeadroom = 4 << 10

func (r *runner) fitsWithin(limit int) bool {
	var off *Offload
	if r.ev.OffloadBytes > 0 {
		off = &Offload{Bytes: r.ev.OffloadBytes, KeepInput: r.p.Secrets(), measure: true}
	}
	b, err := r.st.appendWith(r.scratch[:0], off)
	if err != nil {
		return false
	}
	r.scratch = b[:0]
	return len(b)+r.hist.headerRoom() <= limit
}

// hasRefs reports whether the state, as the engine will write it, keeps
// a value as an object: a root ending with its first large value (its
// output, say) has not had State.Objects set yet.
func (r *runner) hasRefs() bool {
	off := &Offload{Bytes: r.ev.OffloadBytes, KeepInput: r.p.Secrets(), measure: true}
	b, err := r.st.appendWith(r.scratch[:0], off)
	if err == nil {
		r.scratch = b[:0]
	}
	return off.Refs > 0
}

func (r *runner) tooLarge(step, what string) *StepError {
	return newStepError(step, lang.ErrorTypeStateTooLarge, fmt.Sprintf("%s would take the saga's state past its limit of %d bytes", what, r.ev.StoreLimit))
}

// savedVar is a var's value before a step wrote it, to undo the write.
type savedVar struct {
	name string
	v    any
	had  bool
}

func (r *runner) restore(saved []savedVar) {
	for i := len(saved) - 1; i >= 0; i-- {
		if sv := saved[i]; sv.had {
			r.st.Vars[sv.name] = sv.v
		} else {
			delete(r.st.Vars, sv.name)
		}
	}
}

// record tells the observer about a step (s, as rec names it), and keeps
// it in the saga's history.
func (r *runner) record(s *planStep, rec StepRecord) {
	if r.ev.OnStep != nil {
		r.ev.OnStep(rec)
	}
	r.remember(s, rec)
}

// valueLimit is the largest result an expression may build: a value an
// object can hold when the state keeps large values apart, else what the
// state itself can (maxResultBytes).
func (r *runner) valueLimit() int {
	if r.ev.OffloadBytes > 0 {
		return MaxValueBytes
	}
	return 0
}

func (r *runner) activation(vars map[string]any, attempt int) *activation {
	r.act = activation{st: r.st, vars: vars, attempt: int64(attempt), now: r.ev.Now, limit: r.valueLimit()}
	return &r.act
}

// run executes steps from idx inline until an action, the end, or a
// failure. Catches route within the loop, so a route back counts against
// MaxInlineSteps like any other step. Each kind of step runs in a method
// of its own, which reports the index to run next, and false when the run
// stops there.
func (r *runner) run(idx int) {
	st, p := r.st, r.p
	for n := 0; ; n++ {
		if idx == end {
			r.succeed(st.Vars)
			return
		}
		if idx == branchEnd {
			r.branchEnded()
			return
		}
		if !st.Deadline.IsZero() && !r.ev.Now.Before(st.Deadline) {
			r.compensate(&StepError{Step: p.steps[idx].ID, Type: lang.ErrorTypeDeadline, Message: fmt.Sprintf("saga deadline %s passed", st.Deadline.UTC().Format(time.RFC3339))})
			return
		}
		s := p.steps[idx]
		if n >= p.opts.MaxInlineSteps {
			r.caught(s, 1, &StepError{Step: s.ID, Type: lang.ErrorTypeStepLimit, Message: fmt.Sprintf("ran %d steps in one transition without an action", n)})
			return
		}
		if lang.IsFork(s.Kind) {
			next, goOn := r.fork(s, idx)
			if !goOn {
				return
			}
			idx = next
			continue
		}
		var goOn bool
		switch s.Kind {
		case lang.KindAction:
			idx, goOn = r.actionStep(s, idx)
		case lang.KindSet:
			idx, goOn = r.setStep(s)
		case lang.KindSwitch:
			idx, goOn = r.switchStep(s)
		case lang.KindAssert:
			idx, goOn = r.assertStep(s)
		case lang.KindFail:
			idx, goOn = r.failStep(s)
		case lang.KindWait:
			idx, goOn = r.waitStep(s, idx)
		case lang.KindAwait:
			idx, goOn = r.awaitStep(s, idx)
		case lang.KindSucceed:
			idx, goOn = r.succeedStep(s)
		default: // no other kind compiles
			idx, goOn = r.completed(s, idx)
		}
		if !goOn {
			return
		}
	}
}

// completed records that the pure step s completed, and goes on at next.
func (r *runner) completed(s *planStep, next int) (int, bool) {
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompleted, Attempt: 1})
	return next, true
}

// actionStep starts a visit of action step s (at idx): the saga waits for
// its first attempt. Past MaxVisits the step fails instead, and the saga
// compensates (no catch takes a visit limit).
func (r *runner) actionStep(s *planStep, idx int) (int, bool) {
	st, p := r.st, r.p
	if st.Seq >= uint64(p.opts.MaxVisits) {
		r.caught(s, 1, &StepError{Step: s.ID, Type: lang.ErrorTypeVisitLimit, Message: fmt.Sprintf("the saga made %d action visits, its limit", st.Seq)})
		return 0, false
	}
	st.Seq++
	st.Cursors = append(st.Cursors[:0], Cursor{Step: idx, Attempt: 1, Seq: st.Seq})
	st.Status = durable.StatusRunning
	r.send(durable.QueueAdvance, s.ID, 1, 0)
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeStarted, Attempt: 1})
	return 0, false
}

// setStep assigns set step s's vars, in order. A failed expression undoes
// the assignments before it. So does a state grown past the store limit,
// which fails the saga: no catch takes it.
func (r *runner) setStep(s *planStep) (int, bool) {
	st := r.st
	var buf [4]savedVar // most sets assign a few vars: no allocation for them
	saved := buf[:0]
	for _, a := range s.assigns {
		v, err := a.val.eval(r.activation(st.Vars, 1))
		if err != nil {
			r.restore(saved) // a failed step writes nothing
			return r.caught(s, 1, exprError(s.ID, err))
		}
		old, had := st.Vars[a.name]
		saved = append(saved, savedVar{a.name, old, had})
		st.Vars[a.name] = v
	}
	if !r.fits() {
		r.restore(saved)
		r.caught(s, 1, r.tooLarge(s.ID, "the values step "+s.ID+" sets"))
		return 0, false
	}
	return r.completed(s, s.nextIndex)
}

// switchStep goes on at the first case of switch step s whose condition
// holds.
func (r *runner) switchStep(s *planStep) (int, bool) {
	next, err := r.choose(s)
	if err != nil {
		return r.caught(s, 1, exprError(s.ID, err))
	}
	return r.completed(s, next)
}

// assertStep fails assert step s when its condition does not hold.
func (r *runner) assertStep(s *planStep) (int, bool) {
	ok, err := r.holds(s.check)
	var se *StepError
	switch {
	case err != nil:
		se = exprError(s.ID, err)
	case !ok:
		msg := s.Assert.Message
		if msg == "" {
			msg = "assertion failed: " + s.Assert.If
		}
		se = &StepError{Step: s.ID, Type: s.Assert.Error, Message: msg}
	}
	if se != nil {
		return r.caught(s, 1, se)
	}
	return r.completed(s, s.nextIndex)
}

// failStep fails the saga at fail step s: it compensates, past every catch.
func (r *runner) failStep(s *planStep) (int, bool) {
	msg := s.Fail.Message
	if msg == "" {
		msg = "the saga reached fail step " + s.ID
	}
	err := &StepError{Step: s.ID, Type: s.Fail.Error, Message: msg}
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeFailed, Attempt: 1, Error: err})
	r.compensate(err)
	return 0, false
}

// waitStep pauses the saga at wait step s (at idx) until its timer is due,
// or goes on at once when it is due already.
func (r *runner) waitStep(s *planStep, idx int) (int, bool) {
	due, err := r.due(s)
	if err != nil {
		return r.caught(s, 1, exprError(s.ID, err))
	}
	if due.After(r.ev.Now) {
		r.pauseVisit(s, idx, due)
		return 0, false
	}
	return r.completed(s, s.nextIndex) // due already: until in the past goes on at once
}

// awaitStep takes the signal await step s (at idx) waits for, if it was
// kept, or pauses the saga until it comes or the await times out.
func (r *runner) awaitStep(s *planStep, idx int) (int, bool) {
	if d, ok := takeSignal(r.st, s.Await.Signal); ok {
		if !r.takeOut(s, d.Payload) {
			return 0, false
		}
		return r.completed(s, s.nextIndex)
	}
	r.pauseVisit(s, idx, r.ev.Now.Add(awaitTimeout(s)))
	return 0, false
}

// succeedStep ends the saga, succeeded, at succeed step s, with its output
// (the vars without one). An output too large to store fails the step, and
// the saga compensates (no catch takes that).
func (r *runner) succeedStep(s *planStep) (int, bool) {
	st := r.st
	var out any = st.Vars
	if s.output != nil {
		v, err := s.output.eval(r.activation(st.Vars, 1))
		if err != nil {
			return r.caught(s, 1, exprError(s.ID, err))
		}
		out = v
	}
	r.succeed(out)
	if !r.fits() {
		st.Output, st.Status = nil, durable.StatusRunning
		r.caught(s, 1, r.tooLarge(s.ID, "the output of step "+s.ID))
		return 0, false
	}
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompleted, Attempt: 1})
	return 0, false
}

// pauseVisit starts a visit of a wait or await step: the saga waits on a
// timer due at due. A visit, as an action's: a loop of waits ends at
// MaxVisits.
func (r *runner) pauseVisit(s *planStep, idx int, due time.Time) {
	st, p := r.st, r.p
	if st.Seq >= uint64(p.opts.MaxVisits) {
		r.caught(s, 1, &StepError{Step: s.ID, Type: lang.ErrorTypeVisitLimit, Message: fmt.Sprintf("the saga made %d visits of actions and waits, its limit", st.Seq)})
		return
	}
	st.Seq++
	r.pause(s, Cursor{Step: idx, Attempt: 1, Seq: st.Seq}, due)
}

// pause makes the saga wait on cur (a wait's or await's timer, or a
// callback's token) until due.
func (r *runner) pause(s *planStep, cur Cursor, due time.Time) {
	st := r.st
	cur.Wait, cur.Due = true, due
	st.Cursors = append(st.Cursors[:0], cur)
	st.Status = durable.StatusWaiting
	if wake := st.WakeAt(); wake.Sub(r.ev.Now) <= durable.MaxDelay {
		// Due within what a queue's delay covers: the message is the
		// timer. Later ones are sent by the ticker when they come near
		// (durable.SagaRecord.WakeAt).
		r.send(durable.QueueAdvance, s.ID, cur.Attempt, wake.Sub(r.ev.Now))
	}
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeWaiting, Attempt: cur.Attempt})
}

// takeOut writes a received payload to the step's out, and reports false
// (the step failed) when the state would not fit.
func (r *runner) takeOut(s *planStep, v any) bool {
	st := r.st
	if s.Out == "" {
		return true
	}
	old, had := st.Vars[s.Out]
	st.Vars[s.Out] = v
	if !r.fits() {
		r.restore([]savedVar{{s.Out, old, had}})
		r.caught(s, 1, r.tooLarge(s.ID, "the payload step "+s.ID+" received"))
		return false
	}
	r.wroteOut(s.Out)
	return true
}

// received completes an await with the signal's payload, and goes on.
func (r *runner) received(s *planStep, payload any) {
	if !r.takeOut(s, payload) {
		return
	}
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompleted, Attempt: 1})
	r.run(s.nextIndex)
}

// callbackResult ends a callback attempt whose action returned success
// (the step is on the compensation stack already): with the token's
// output, the step completes; with its failure or timeout, it is retried
// with a new attempt (and token) or fails.
func (r *runner) callbackResult(s *planStep, cur Cursor, d Delivery) {
	st := r.st
	takeCallback(st, cur) // no completion of this attempt or one before it is kept any longer
	if d.Err != nil {
		se := newStepError(s.ID, d.Err.Type, d.Err.Message)
		st.Cursors = append(st.Cursors[:0], Cursor{Step: cur.Step, Attempt: cur.Attempt, Seq: cur.Seq, Budget: cur.Budget})
		if r.retryable(s.policy, cur.Attempt-cur.Budget, &ActionError{Type: se.Type}, se.Type) && !r.pastDeadline() {
			r.retry(s, s.policy, st.Cursors[0], durable.QueueAdvance, false, se)
			return
		}
		r.failing = st.Cursors[0]
		st.Cursors = st.Cursors[:0]
		r.stepFailed(s, cur.Attempt, se)
		return
	}
	st.Cursors = st.Cursors[:0]
	out, err := CheckValue(d.Payload)
	if err != nil {
		r.stepFailed(s, cur.Attempt, newStepError(s.ID, lang.ErrorTypeOutputFormat, "callback output: "+err.Error()))
		return
	}
	saved := []savedVar{}
	if s.Out != "" {
		old, had := st.Vars[s.Out]
		saved = append(saved, savedVar{s.Out, old, had})
		st.Vars[s.Out] = out
	}
	top := len(st.Stack) - 1
	onStack := top >= 0 && s.keepOut && st.Stack[top].Step == cur.Step && st.Stack[top].Seq == cur.Seq
	var was Completion
	if onStack {
		was = st.Stack[top]
		st.Stack[top].Out, st.Stack[top].HasOut = out, true
	}
	if !r.fits() {
		// The completion is refused: the compensation reads what the
		// action returned, as before it.
		r.restore(saved)
		if onStack {
			st.Stack[top] = was
		}
		r.stepFailed(s, cur.Attempt, r.tooLarge(s.ID, "the callback output of step "+s.ID))
		return
	}
	r.wroteOut(s.Out)
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompleted, Attempt: cur.Attempt})
	r.run(s.nextIndex)
}

// pastDeadline reports whether the saga's deadline has passed at the
// transition's time: no retry starts then.
func (r *runner) pastDeadline() bool {
	return !r.st.Deadline.IsZero() && !r.ev.Now.Before(r.st.Deadline)
}

func awaitTimeout(s *planStep) time.Duration {
	if s.Await.Timeout > 0 {
		return s.Await.Timeout
	}
	return lang.MaxWait
}

func callbackTimeout(s *planStep) time.Duration {
	if s.Callback.Timeout > 0 {
		return s.Callback.Timeout
	}
	return lang.MaxWait
}

// due is when a wait step's timer is due: its for after now, or its until.
func (r *runner) due(s *planStep) (time.Time, error) {
	if s.until == nil {
		return r.ev.Now.Add(s.Wait.For), nil
	}
	v, err := s.until.eval(r.activation(r.st.Vars, 1))
	if err != nil {
		return time.Time{}, err
	}
	t, ok := v.Value().(time.Time)
	if !ok {
		return time.Time{}, &ActionError{Type: lang.ErrorTypeExpression, Message: fmt.Sprintf("wait until ${%s} is %s, not a timestamp", s.until.src, typeName(v.Type().TypeName()))}
	}
	if limit := r.ev.Now.Add(lang.MaxWait); t.After(limit) {
		return time.Time{}, &ActionError{Type: lang.ErrorTypeExpression, Message: fmt.Sprintf("wait until %s is more than %s ahead, the longest wait", t.UTC().Format(time.RFC3339), lang.FormatDuration(lang.MaxWait))}
	}
	return t, nil
}

func (r *runner) choose(s *planStep) (int, error) {
	for _, c := range s.cases {
		if c.cond == nil {
			return c.nextIndex, nil
		}
		ok, err := r.holds(c.cond)
		if err != nil {
			return 0, err
		}
		if ok {
			return c.nextIndex, nil
		}
	}
	return s.nextIndex, nil
}

func (r *runner) holds(prg *program) (bool, error) {
	v, err := prg.eval(r.activation(r.st.Vars, 1))
	if err != nil {
		return false, err
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, &ActionError{Type: lang.ErrorTypeExpression, Message: fmt.Sprintf("${%s} is %s, not a bool", prg.src, typeName(v.Type().TypeName()))}
	}
	return b, nil
}

func exprError(step string, err error) *StepError {
	return newStepError(step, ErrorType(err), errorMessage(err))
}

func (r *runner) succeed(out any) {
	st := r.st
	st.Status = durable.StatusSucceeded
	st.Output = out
	st.Cursors = st.Cursors[:0]
}

func (r *runner) send(q durable.QueueName, step string, attempt int, delay time.Duration) {
	r.st.Outbox = append(r.st.Outbox, durable.Message{SagaID: r.st.SagaID, Version: r.st.Version, Queue: q, Step: step, Attempt: attempt, Delay: delay})
}

// stepFailed handles a step failing for good: a catch routes it, or the saga compensates.
func (r *runner) stepFailed(s *planStep, attempt int, err *StepError) {
	if next, caught := r.caught(s, attempt, err); caught {
		r.run(next)
	}
}

// caught records a failure and reports whether a catch clause takes it;
// if none does, the saga starts compensating. lang.Uncatchable failures, and
// any failure of a saga whose cancel is pending, go past every catch.
func (r *runner) caught(s *planStep, attempt int, err *StepError) (int, bool) {
	if r.st.CancelRequested {
		r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeFailed, Attempt: attempt, Error: err})
		r.compensate(cancelled())
		return 0, false
	}
	for _, c := range s.routes {
		if lang.Uncatchable(err.Type) {
			break
		}
		if slices.Contains(c.errors, err.Type) || slices.Contains(c.errors, "*") {
			r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCaught, Attempt: attempt, Error: err})
			return c.nextIndex, true
		}
	}
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeFailed, Attempt: attempt, Error: err})
	if r.holdsOn(s, err) {
		r.hold(s, err)
		return 0, false
	}
	r.compensate(err)
	return 0, false
}

func (r *runner) actionResult() {
	st, ev := r.st, r.ev
	cur := st.Cursors[0]
	s := r.p.steps[cur.Step]
	bad := asInvalidOutput(ev.Err)
	if ev.Err != nil && bad == nil {
		r.actionFailed(s, cur, ev.Err)
		return
	}
	// The action returned success: from here on it is on the compensation
	// stack, whatever happens to its output.
	st.Cursors = st.Cursors[:0]
	out, err := CheckValue(ev.Output)
	if bad != nil || err != nil {
		msg := "action output: "
		if bad != nil {
			msg += bad.msg
		} else {
			msg += err.Error()
		}
		r.complete(s, cur, nil, false)
		r.stepFailed(s, cur.Attempt, newStepError(s.ID, lang.ErrorTypeOutputFormat, msg))
		return
	}
	var saved []savedVar
	if r.ev.StoreLimit > 0 && s.Out != "" {
		old, had := st.Vars[s.Out]
		saved = append(saved, savedVar{s.Out, old, had})
	}
	r.complete(s, cur, out, true)
	if !r.fits() {
		// The step fails. A failed saga may grow to maxSettledStateBytes:
		// keep the output there if it fits, so that the compensation can
		// read it; drop it otherwise.
		if !r.fitsWithin(maxSettledStateBytes - settledHeadroom) {
			r.restore(saved)
			if n := len(st.Stack); s.comp != nil && n > 0 {
				st.Stack[n-1].Out, st.Stack[n-1].HasOut, st.Stack[n-1].OutDropped = nil, false, s.Out != ""
			}
		}
		r.stepFailed(s, cur.Attempt, r.tooLarge(s.ID, "the output of action "+s.Action))
		return
	}
	if s.Callback != nil && !st.CancelRequested {
		// The action started the work; its token completes the step. A
		// completion that came while the action ran is taken at once.
		if d, ok := takeCallback(st, cur); ok {
			r.callbackResult(s, cur, d)
			return
		}
		if dl := st.Deadline; !dl.IsZero() && !r.ev.Now.Before(dl) {
			// The attempt ran past the deadline (it may have taken effect
			// before it): nothing waits on its token; the saga compensates.
			takeCallback(st, cur)
			err := &StepError{Step: s.ID, Type: lang.ErrorTypeDeadline, Message: fmt.Sprintf("saga deadline %s passed before the callback of %s", dl.UTC().Format(time.RFC3339), s.ID)}
			r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeFailed, Attempt: cur.Attempt, Error: err})
			r.compensate(err)
			return
		}
		r.pause(s, cur, r.ev.Now.Add(callbackTimeout(s)))
		return
	}
	if s.Callback != nil {
		takeCallback(st, cur)
	}
	r.record(s, StepRecord{Step: s.ID, Kind: s.Kind, Outcome: OutcomeCompleted, Attempt: cur.Attempt})
	if st.CancelRequested {
		r.compensate(cancelled())
		return
	}
	r.run(s.nextIndex)
}

// complete records a succeeded action: its output in its var (when kept)
// and the step on the compensation stack if it declares compensate.
func (r *runner) complete(s *planStep, cur Cursor, out any, keep bool) {
	st := r.st
	if keep && s.Out != "" {
		st.Vars[s.Out] = out
		r.wroteOut(s.Out)
	}
	if s.comp != nil {
		c := Completion{Step: cur.Step, Seq: cur.Seq, OutDropped: !keep && s.Out != ""}
		if keep && s.keepOut {
			c.Out, c.HasOut = out, true
		}
		if n := len(st.Stack); n > 0 && st.Stack[n-1].Step == c.Step && st.Stack[n-1].Seq == c.Seq {
			// A callback step's later attempt: one completion per visit.
			st.Stack[n-1] = c
			return
		}
		st.Stack = append(st.Stack, c)
	}
}

func (r *runner) actionFailed(s *planStep, cur Cursor, err error) {
	st := r.st
	if s.Callback != nil {
		takeCallback(st, cur) // the attempt failed: a completion of its token no longer applies
	}
	typ := ErrorType(err)
	se := newStepError(s.ID, typ, errorMessage(err))
	if r.retryable(s.policy, cur.Attempt-cur.Budget, err, typ) && !st.CancelRequested && !r.pastDeadline() {
		r.retry(s, s.policy, cur, durable.QueueAdvance, false, se)
		return
	}
	// Out of attempts, permanent, or cancelled meanwhile: no attempt
	// follows. One that ran into its deadline (or a transient failure
	// after one that did) may have taken effect: it goes on the stack,
	// unknown, and is found out if the saga compensates.
	cur.Unknown = typ == lang.ErrorTypeTimeout || cur.Unknown && !definite(s.policy, err, typ)
	if n := len(st.Stack); !cur.Unknown && n > 0 && st.Stack[n-1].Unknown && st.Stack[n-1].Step == cur.Step && st.Stack[n-1].Seq == cur.Seq {
		// An operator's retry of a held step that was unknown: this
		// attempt's answer, under the same key, says none took effect.
		st.Stack = st.Stack[:n-1]
	}
	r.unknownOutcome(s, cur, cur.Attempt)
	st.Cursors = st.Cursors[:0]
	r.failing = cur
	r.stepFailed(s, cur.Attempt, se)
}

// unknownOutcome puts step s's visit on the compensation stack, unknown,
// when the attempt ended (attempts ran, the last at cur) may have taken
// effect: cur.Unknown says the last attempt ran into its deadline. Steps
// without a compensation have nothing to undo; a callback step whose
// action succeeded is on the stack already.
func (r *runner) unknownOutcome(s *planStep, cur Cursor, attempts int) {
	st := r.st
	if !cur.Unknown || s.comp == nil || cur.Compensating || attempts < 1 {
		return
	}
	if n := len(st.Stack); n > 0 && st.Stack[n-1].Step == cur.Step && st.Stack[n-1].Seq == cur.Seq {
		if !st.Stack[n-1].Unknown {
			return // a callback step's action that succeeded
		}
		// Unknown since before a hold, and retried since: the entry is
		// made again, so that finding out is numbered after the last
		// attempt, with its input.
		st.Stack = st.Stack[:n-1]
	}
	c := Completion{Step: cur.Step, Seq: cur.Seq, Unknown: true, Attempts: attempts}
	if s.args != nil {
		// The input the attempts had: vars are as they saw them (nothing
		// ran since), the attempt the last one.
		in, err := s.args.eval(&activation{st: st, vars: st.Vars, attempt: int64(attempts), now: r.ev.Now, limit: r.valueLimit()})
		c.Input, c.HasInput = in, err == nil
	}
	st.Stack = append(st.Stack, c)
	if c.HasInput && !r.fitsWithin(maxSettledStateBytes-settledHeadroom) {
		// Too large to keep beside the rest: evaluated again when asked.
		st.Stack[len(st.Stack)-1].Input, st.Stack[len(st.Stack)-1].HasInput = nil, false
	}
}
