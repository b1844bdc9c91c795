package durable

import (
	"context"
	"fmt"
	"time"
)

// PauseKind says what a pause matches.
type PauseKind string

const (
	// PauseName pauses the steps of the sagas of one name (a child saga
	// runs under its own name: a pause of its parent's does not hold it).
	PauseName PauseKind = "name"
	// PauseAction pauses the calls of one action, in every saga.
	PauseAction PauseKind = "action"
)

// PauseKinds lists every PauseKind.
func PauseKinds() []PauseKind { return []PauseKind{PauseName, PauseAction} }

// Pause is one operator's pause: the steps it matches are deferred, not
// run, until it is deleted or its Until passes.
type Pause struct {
	Kind   PauseKind // what Target names
	Target string    // a saga name or an action name
	// Until, when set, ends the pause by itself: from then on it matches
	// nothing, stored or not. Zero: until deleted.
	Until time.Time
	// Compensations: the pause holds the compensations it matches too.
	// Without it they run, so that a saga that fails or is cancelled
	// undoes what it did while its forward steps are paused.
	Compensations bool
	CreatedAt     time.Time // when it was put
}

// Active reports whether p holds at now: it has no Until, or now is
// before it.
func (p *Pause) Active(now time.Time) bool {
	return p.Until.IsZero() || now.Before(p.Until)
}

// MaxPauseTargetBytes is the longest name or action a pause names.
const MaxPauseTargetBytes = 256

// PausePutParams stores a pause (Pauses.PausePut).
type PausePutParams struct {
	Pause Pause // the pause to store; its Kind and Target are its key
}

// Check reports an unknown kind or an empty or overlong target.
func (p *PausePutParams) Check() error {
	return checkPause(p.Pause.Kind, p.Pause.Target)
}

// PauseDeleteParams deletes a pause (Pauses.PauseDelete).
type PauseDeleteParams struct {
	Kind   PauseKind // the kind of the pause to delete
	Target string    // its saga name or action
}

// Check reports an unknown kind or an empty or overlong target.
func (p *PauseDeleteParams) Check() error {
	return checkPause(p.Kind, p.Target)
}

// PauseListParams lists the pauses (Pauses.PauseList).
type PauseListParams struct {
	// Consistent asks for a read that sees every put and delete that
	// returned before it (store/dynamo: a strongly consistent read).
	// Without it, one of the last second may not be seen yet: what the
	// workers' cache needs, as it reads again every few seconds anyway.
	Consistent bool
}

func checkPause(kind PauseKind, target string) error {
	if kind != PauseName && kind != PauseAction {
		return fmt.Errorf("pause kind %q: must be %q or %q", kind, PauseName, PauseAction)
	}
	if target == "" || len(target) > MaxPauseTargetBytes {
		return fmt.Errorf("pause of %s %q: the %s must be 1 to %d bytes", kind, target, kind, MaxPauseTargetBytes)
	}
	return nil
}

// Pauses is what a Store may also do: keep the operators' pauses, a few
// small items, so that the workers find them with one read every few
// seconds per process, never one per step. The engine finds it by type
// assertion on CoordinatorConfig.Store; a store without it has no pauses.
// storetest.Exercise checks it on the stores that have it.
type Pauses interface {
	// PausePut stores a pause, replacing the one of the same Kind and
	// Target if there is one (its Until, Compensations and CreatedAt
	// become p's). An error for a kind or target out of range (Check).
	PausePut(ctx context.Context, p *PausePutParams) error
	// PauseDelete removes the pause of Kind and Target: ErrNotFound when
	// there is none. An expired pause that is still stored is removed
	// like any other.
	PauseDelete(ctx context.Context, p *PauseDeleteParams) error
	// PauseList returns every pause stored, expired ones included (a
	// caller judges them by Pause.Active), sorted by Kind then Target. It
	// never returns ErrNotFound: no pause is an empty list.
	PauseList(ctx context.Context, p *PauseListParams) ([]Pause, error)
}
