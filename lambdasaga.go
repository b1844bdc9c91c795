// Package lambdasaga runs sagas on AWS Lambda, DynamoDB and SQS: a business
// transaction across several services, described in YAML, each step an
// action on a service, the steps done undone by their compensations, newest
// first, when a later one fails for good.
//
// It is the one import the common path needs:
//
//   - actions: write each as a Go function (Typed decodes its input) and
//     register it by the name the definition calls (Actions);
//   - definitions: load and check them before anything runs
//     (LoadDefinition, ParseDefinition), every problem with its file:line;
//   - in process, for tests and tools: run sagas with the same protocol the
//     functions run, in virtual time if asked (NewLocal);
//   - against a deployment: start, read, list, signal, complete callbacks,
//     cancel and resume sagas (NewClient);
//   - on Lambda: the function that runs the steps with your actions
//     (StartLambda).
//
// Every read returns a view of a saga (Saga, HistoryEntry), never the
// engine's state. The language is in docs/DEFINITIONS.md, the statuses in
// docs/STATES.md, deploying in docs/DEPLOY.md.
package lambdasaga

import (
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Status is where a saga stands: running, waiting, held, succeeded,
// compensating, compensated or compensation_failed (docs/STATES.md).
type Status string

// The statuses.
const (
	StatusRunning            Status = Status(durable.StatusRunning)
	StatusWaiting            Status = Status(durable.StatusWaiting)
	StatusHeld               Status = Status(durable.StatusHeld)
	StatusSucceeded          Status = Status(durable.StatusSucceeded)
	StatusCompensating       Status = Status(durable.StatusCompensating)
	StatusCompensated        Status = Status(durable.StatusCompensated)
	StatusCompensationFailed Status = Status(durable.StatusCompensationFailed)
)

// Final reports whether a saga in this status will never move again by
// itself: succeeded or compensated. A saga parked in compensation_failed
// moves again only when an operator resumes it.
func (s Status) Final() bool { return durable.Status(s).Final() }

// Saga is what a saga is at one version: a read-only view. The inputs its
// definition declares secret are masked wherever they would appear (the
// output, the failure messages); when the definition cannot be read, the
// output and the messages are hidden whole.
type Saga struct {
	ID      string // the saga's id
	Name    string // its definition's name
	Status  Status // where it stands
	Version uint64 // how many transitions it has made
	// Step is the step it is at (running, waiting) or compensating; empty
	// when it has ended.
	Step      string
	CreatedAt time.Time // when it started
	UpdatedAt time.Time // its last transition
	// Deadline is when the saga's timeout passes; zero without one.
	Deadline time.Time
	// Output is what the saga returned, once succeeded: its succeed
	// output, or its vars.
	Output any
	// Failure is why it compensates or compensated; nil when nothing
	// failed. A cancel is a failure of type Cancelled.
	Failure *Failure
	// CompensationFailure is why a compensation failed, for a saga in
	// compensation_failed.
	CompensationFailure *Failure
}

// Failure is a step's failure, or the saga's (a cancel, its deadline).
type Failure struct {
	Step    string // the step that failed; empty when none did
	Type    string // the error type: what catch and retry.permanent match
	Message string // what went wrong, secrets masked
}

// Error says which step failed, with what type and message.
func (f *Failure) Error() string {
	if f.Step == "" {
		return f.Type + ": " + f.Message
	}
	return "step " + f.Step + ": " + f.Type + ": " + f.Message
}

// hidden replaces what may hold a secret when the definition that says
// what is secret cannot be read.
const hidden = "[hidden: the saga's definition, which says what is secret, could not be read]"

// sagaOf makes the view of st: plan, the definition it runs, masks its
// secrets and names its step; nil hides its output and messages.
func sagaOf(st *saga.State, plan *saga.Plan) *Saga {
	if st == nil {
		return nil
	}
	if plan != nil {
		st = plan.Redactor(st).State(st)
	}
	s := &Saga{ID: st.SagaID, Name: st.Name, Status: Status(st.Status), Version: st.Version,
		CreatedAt: st.CreatedAt, UpdatedAt: st.UpdatedAt, Deadline: st.Deadline,
		Failure: failureOf(st.Failure), CompensationFailure: failureOf(st.CompensationError)}
	if st.Status == durable.StatusSucceeded {
		s.Output = st.Output
	}
	if plan == nil {
		if s.Output != nil {
			s.Output = hidden
		}
		for _, f := range []*Failure{s.Failure, s.CompensationFailure} {
			if f != nil {
				f.Message = hidden
			}
		}
	}
	if cur, ok := st.Pending(); ok && plan != nil && !st.Status.Final() {
		s.Step = plan.StepID(cur.Step)
	}
	return s
}

func failureOf(e *saga.StepError) *Failure {
	if e == nil {
		return nil
	}
	return &Failure{Step: e.Step, Type: e.Type, Message: e.Message}
}
