package saga

import (
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// DryRunParams drive a dry run.
type DryRunParams struct {
	Input map[string]any // checked with CheckInput
	// Act answers each call; nil: every call succeeds with its input as output.
	Act func(Call) (any, error)
	// OnStep, when set, hears of every step and compensation, and how it
	// ended: the account of what the saga did.
	OnStep func(StepRecord)
	// OnCall, when set, hears of every call made. A call whose input cannot
	// be built is not made: OnStep hears that its step (or compensation)
	// failed.
	OnCall func(Call)
	// Signals are the payloads awaits get, by signal name; an await whose
	// signal is not here gets one with no payload (null).
	Signals map[string]any
}

// dryRunSecret keys a dry run's callback tokens.
var dryRunSecret = []byte("dry-run-callbacks")

// dryRunStart is the fixed time of a dry run: its result depends on nothing else.
var dryRunStart = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// dryRunMaxCalls bounds the calls of one dry run: beyond the action visits
// a saga may make (DefaultMaxVisits), room for their compensations and
// retries.
const dryRunMaxCalls = 3 * DefaultMaxVisits

// DryRun runs a saga with Advance alone, in memory, answering its calls
// with Act, and returns its final state: for showing a path, what a
// failure would compensate, or what a saga costs, without running anything.
// A saga that Act's answers keep in a loop is not final after
// dryRunMaxCalls calls: DryRun then returns an error saying so.
func (p *Plan) DryRun(params DryRunParams) (*State, error) {
	st := &State{}
	if err := p.Advance(st, Event{Kind: EventStart, Now: dryRunStart, SagaID: "dry-run", Input: params.Input, OnStep: params.OnStep, Secret: dryRunSecret}); err != nil {
		return nil, err
	}
	d := &dryRunner{params: params, now: dryRunStart, children: map[string]*dryChild{}}
	if err := d.drive(p, st); err != nil {
		return nil, err
	}
	return st, nil
}

// dryRunner drives a dry run: a saga and, one after the other, the
// children of its forks.
type dryRunner struct {
	params   DryRunParams
	now      time.Time
	calls    int
	lastOut  any                  // the last action's output: a callback completes with it
	children map[string]*dryChild // by child id: a parent may undo them later
}

type dryChild struct {
	plan *Plan
	st   *State
}

// drive advances st until it is final.
func (d *dryRunner) drive(p *Plan, st *State) error {
	params := d.params
	for {
		cur, pending := st.Pending()
		if !pending {
			return nil // the saga is final
		}
		if d.calls++; d.calls > dryRunMaxCalls {
			return fmt.Errorf("dry run of saga %s did not end within %d calls: a loop its answers never leave (each output is its input unless a failure is forced)", p.Name(), dryRunMaxCalls)
		}
		s := p.steps[cur.Step]
		switch {
		case cur.Fork:
			if err := d.fork(p, st, cur); err != nil {
				return err
			}
			continue
		case cur.Wait && (s.Kind == lang.KindAwait || s.Callback != nil):
			// An await gets its signal, with no payload, and a callback
			// its completion, with the action's output, at once.
			ev := Event{Now: d.now, OnStep: params.OnStep, Delivery: Delivery{Signal: "", Payload: d.lastOut}}
			if s.Kind == lang.KindAwait {
				ev.Delivery = Delivery{Signal: s.Await.Signal, Payload: params.Signals[s.Await.Signal]}
			} else {
				ev.Delivery.Token = p.CallbackToken(st)
			}
			if _, err := p.Receive(st, &ev); err != nil {
				return err
			}
			continue
		case cur.Held:
			// Held (on_failure: hold): the dry run shows what an
			// operator's compensate (or the hold's end) undoes.
			if err := p.Advance(st, Event{Kind: EventCompensate, Now: d.now, OnStep: params.OnStep}); err != nil {
				return err
			}
			continue
		case cur.Wait:
			// A wait: its timer fires when due, and time moves on to then.
			d.now = st.WakeAt()
			if err := p.Advance(st, Event{Kind: EventTimer, Now: d.now, OnStep: params.OnStep}); err != nil {
				return err
			}
			continue
		}
		var out any
		call, callErr := p.Call(st, d.now)
		if callErr != nil {
			// Building the input failed: the step fails, as in the coordinator.
			callErr = Permanent(callErr)
		} else {
			if params.OnCall != nil {
				params.OnCall(call)
			}
			out = call.Input
			if params.Act != nil {
				out, callErr = params.Act(call)
			}
		}
		d.lastOut = out
		if err := p.Advance(st, Event{Kind: EventResult, Now: d.now, Output: out, Err: callErr, OnStep: params.OnStep}); err != nil {
			return err
		}
	}
}

// fork runs the fork st waits on, its children one after the other, until
// one fails, then joins it; or undoes the child st undoes.
func (d *dryRunner) fork(p *Plan, st *State, cur Cursor) error {
	s := p.steps[cur.Step]
	if cur.Compensating {
		id := durable.ChildID(st.SagaID, s.ID, cur.Seq, cur.Child)
		u := &Undone{Child: cur.Child}
		if c := d.children[id]; c != nil && c.st.Status == durable.StatusSucceeded {
			if err := c.plan.Advance(c.st, Event{Kind: EventUndo, Now: d.now, OnStep: d.params.OnStep}); err != nil {
				return err
			}
			if err := d.drive(c.plan, c.st); err != nil {
				return err
			}
			if c.st.Status == durable.StatusCompensationFailed {
				u.Parked = c.st.CompensationError
			}
		}
		return p.Advance(st, Event{Kind: EventUndone, Now: d.now, Undone: u, OnStep: d.params.OnStep})
	}
	j := &Join{Version: cur.Version}
	outputs := make([]any, cur.Children)
	for k := range cur.Children {
		cp, cs, err := p.Launch(st, k)
		if err != nil {
			return err
		}
		id := durable.ChildID(st.SagaID, s.ID, cur.Seq, k)
		child := &State{}
		if err := cp.Advance(child, Event{Kind: EventStart, Now: d.now, SagaID: id, Input: cs.Input, Child: cs, OnStep: d.params.OnStep, Secret: dryRunSecret}); err != nil {
			return err
		}
		d.children[id] = &dryChild{plan: cp, st: child}
		if err := d.drive(cp, child); err != nil {
			return err
		}
		if child.Status == durable.StatusCompensationFailed {
			j.Parked = append(j.Parked, k)
		}
		if child.Status != durable.StatusSucceeded {
			j.Failure = child.Failure
			if j.Failure == nil {
				j.Failure = &StepError{Step: s.ID, Type: lang.ErrorTypeGeneric, Message: fmt.Sprintf("child %d of %s failed", k, s.ID)}
			}
			break
		}
		j.Succeeded = append(j.Succeeded, k)
		outputs[k] = child.Output
	}
	if j.Failure == nil {
		j.Outputs = outputs
	}
	return p.Advance(st, Event{Kind: EventJoin, Now: d.now, Join: j, OnStep: d.params.OnStep})
}
