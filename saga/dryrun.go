package saga

import (
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/lang"
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
	if p.forks {
		// Only a test compiles forks before their runtime lands.
		return nil, fmt.Errorf("saga %s has parallel, foreach or saga steps, which do not run yet", p.Name())
	}
	st := &State{}
	if err := p.Advance(st, Event{Kind: EventStart, Now: dryRunStart, SagaID: "dry-run", Input: params.Input, OnStep: params.OnStep, Secret: dryRunSecret}); err != nil {
		return nil, err
	}
	now := dryRunStart
	var lastOut any // the last action's output: a callback completes with it
	for range dryRunMaxCalls {
		cur, pending := st.Pending()
		if !pending {
			return st, nil // the saga is final
		}
		if s := p.steps[cur.Step]; cur.Wait && (s.Kind == lang.KindAwait || s.Callback != nil) {
			// An await gets its signal, with no payload, and a callback
			// its completion, with the action's output, at once.
			ev := Event{Now: now, OnStep: params.OnStep, Delivery: Delivery{Signal: "", Payload: lastOut}}
			if s.Kind == lang.KindAwait {
				ev.Delivery = Delivery{Signal: s.Await.Signal, Payload: params.Signals[s.Await.Signal]}
			} else {
				ev.Delivery.Token = p.CallbackToken(st)
			}
			if _, err := p.Receive(st, &ev); err != nil {
				return nil, err
			}
			continue
		}
		if cur.Wait {
			// A wait: its timer fires when due, and time moves on to then.
			now = st.WakeAt()
			if err := p.Advance(st, Event{Kind: EventTimer, Now: now, OnStep: params.OnStep}); err != nil {
				return nil, err
			}
			continue
		}
		var out any
		call, callErr := p.Call(st, now)
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
		lastOut = out
		if err := p.Advance(st, Event{Kind: EventResult, Now: now, Output: out, Err: callErr, OnStep: params.OnStep}); err != nil {
			return nil, err
		}
	}
	if _, pending := st.Pending(); pending {
		return nil, fmt.Errorf("dry run of saga %s did not end within %d calls: a loop its answers never leave (each output is its input unless a failure is forced)", p.Name(), dryRunMaxCalls)
	}
	return st, nil
}
