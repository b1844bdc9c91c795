package lambdasaga

import (
	"context"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/frontdoor"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func init() {
	frontdoor.Registry = func(a any) *engine.Registry {
		if actions, _ := a.(*Actions); actions != nil {
			return actions.reg
		}
		return nil
	}
	frontdoor.ActionsOf = func(reg *engine.Registry) any { return &Actions{reg: reg} }
}

// Call is one call of an action: what a step (or its compensation) asks
// of a service.
type Call struct {
	SagaID string // the saga the call runs for
	Step   string // the id of the step the action belongs to
	Action string // the action's name, the compensation's when Compensation is set
	// Attempt counts from 1 over the retries of one visit to a step.
	Attempt int
	// IdempotencyKey is the same for every attempt and every redelivery
	// of one visit to a step: pass it to the service, so that it applies
	// the effect once. A compensation has its own.
	IdempotencyKey string
	// Input is the step's with (or its compensation's), evaluated, as
	// JSON decodes it (map[string]any, []any, string, float64, bool);
	// nil without one. Typed decodes it into a type of yours.
	Input any
	// Timeout bounds this attempt; zero: no step timeout.
	Timeout time.Duration
	// Compensation marks a call that undoes its step.
	Compensation bool
	// CallbackToken is set for a step with callback: the action starts
	// the work and returns, and the step completes when someone completes
	// the token (Client.CompleteCallback). Each attempt has its own.
	CallbackToken string
	// CallbackTimeout is how long the token may take once the action has
	// returned.
	CallbackTimeout time.Duration
}

func callOf(c saga.Call) Call {
	return Call{SagaID: c.SagaID, Step: c.Step, Action: c.Action, Attempt: c.Attempt, IdempotencyKey: c.IdempotencyKey,
		Input: c.Input, Timeout: c.Timeout, Compensation: c.Compensation, CallbackToken: c.CallbackToken, CallbackTimeout: c.CallbackTimeout}
}

func (c Call) internal() saga.Call {
	return saga.Call{SagaID: c.SagaID, Step: c.Step, Action: c.Action, Attempt: c.Attempt, IdempotencyKey: c.IdempotencyKey,
		Input: c.Input, Timeout: c.Timeout, Compensation: c.Compensation, CallbackToken: c.CallbackToken, CallbackTimeout: c.CallbackTimeout}
}

// ActionFunc is an action: it does the call's work and returns its output
// (any JSON-able value; the step's out receives it), or an error. An
// error is transient (the step's retry policy retries it) unless it is
// Permanent or its type is in the step's retry.permanent; NewError gives
// it a type that catch and retry.permanent can match.
type ActionFunc func(ctx context.Context, call Call) (any, error)

// Typed adapts a function with a typed input and output: the call's input
// is decoded from JSON into In (an input that does not decode fails the
// call for good), and Out is what the step's out receives.
func Typed[In, Out any](fn func(ctx context.Context, call Call, in In) (Out, error)) ActionFunc {
	inner := engine.Typed(func(ctx context.Context, c saga.Call, in In) (Out, error) {
		return fn(ctx, callOf(c), in)
	})
	return func(ctx context.Context, c Call) (any, error) { return inner(ctx, c.internal()) }
}

// Actions maps action names to Go functions. It is safe for concurrent use.
type Actions struct {
	reg *engine.Registry
}

// NewActions returns an empty set of actions.
func NewActions() *Actions { return &Actions{reg: engine.NewRegistry()} }

// Register adds the action name (as definitions call it: "payments.charge").
// An empty name, a nil function or a name registered already is an error.
func (a *Actions) Register(name string, fn ActionFunc) error {
	if fn == nil {
		return a.reg.Register(name, nil)
	}
	return a.reg.Register(name, func(ctx context.Context, c saga.Call) (any, error) { return fn(ctx, callOf(c)) })
}

// MustRegister is Register that panics on its error, for registrations
// at start-up.
func (a *Actions) MustRegister(name string, fn ActionFunc) {
	if err := a.Register(name, fn); err != nil {
		panic(err)
	}
}

// Invoke runs the action call.Action with call, as a worker would: a
// unit test of an action calls it so, with the input as JSON decodes it.
// An action not registered is an error.
func (a *Actions) Invoke(ctx context.Context, call Call) (any, error) {
	return a.reg.Invoke(ctx, call.internal())
}

// Names lists the registered actions, sorted.
func (a *Actions) Names() []string { return a.reg.Names() }

// Permanent marks err as a failure no retry can cure: the step fails at
// once (a catch may take it; otherwise the saga compensates).
func Permanent(err error) error { return saga.Permanent(err) }

// NewError returns an error of a type that a step's catch and
// retry.permanent match by name ("CardDeclined"), with a message.
func NewError(errType, message string) error { return saga.NewError(errType, message) }
