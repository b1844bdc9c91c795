package proptest

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// call is one action call as the fake services saw it.
type call struct {
	Step, Action, Key string
	Attempt           int
	Compensation      bool
	Behaviour         Behaviour
	OK                bool // the call returned success
}

// actions is the fake services: every call draws a behaviour from its
// action's profile and is recorded.
type actions struct {
	mu       sync.Mutex
	profiles map[string]Profile
	r        *rand.Rand
	coord    *engine.Coordinator // for CancelSaga
	oracle   *oracle             // for the callback behaviours
	calls    []call
	cancels  []error // what Cancel returned when an action cancelled its saga
}

func newActions(c *Case) *actions {
	return &actions{profiles: c.Profiles, r: rand.New(rand.NewPCG(c.CallSeed, 1))}
}

// slowest bounds how long a slow action waits for its context: slow calls
// are drawn only for steps with a step timeout shorter than this.
const slowest = 50 * time.Millisecond

func (a *actions) Invoke(ctx context.Context, c saga.Call) (out any, err error) {
	a.mu.Lock()
	b := a.profiles[c.Action].draw(a.r)
	if (b == Slow || b == SlowOK) && (c.Timeout == 0 || c.Timeout >= slowest) {
		b = Echo // slow only where a short step timeout keeps the test fast
	}
	if b == CancelSaga && c.Compensation {
		b = Echo
	}
	if b >= EarlyOK && c.CallbackToken == "" {
		b = Echo
	}
	delta := a.r.IntN(16<<10) - 8<<10
	depth := 60 + a.r.IntN(11)
	a.calls = append(a.calls, call{Step: c.Step, Action: c.Action, Key: c.IdempotencyKey, Attempt: c.Attempt, Compensation: c.Compensation, Behaviour: b, OK: b.succeeds()})
	a.mu.Unlock()
	if a.oracle != nil && !c.Compensation {
		a.oracle.issued(c, a.oracle.index(c.Step))
		if c.CallbackToken != "" && b.succeeds() {
			defer func() { a.oracle.returned(c, out) }()
		}
		if b == CancelSaga {
			a.oracle.relax("an action cancelled its saga")
		}
	}

	switch b {
	case Echo:
		return c.Input, nil
	case Record:
		return map[string]any{"id": c.IdempotencyKey, "ok": true}, nil
	case Big:
		return map[string]any{"id": c.IdempotencyKey, "blob": strings.Repeat("x", saga.MaxStateBytes+delta)}, nil
	case Half:
		return map[string]any{"id": c.IdempotencyKey, "blob": strings.Repeat("h", saga.MaxStateBytes/2)}, nil
	case Deep:
		return map[string]any{"id": c.IdempotencyKey, "deep": nestList(depth, "bottom")}, nil
	case Unencoded:
		return map[string]any{"id": c.IdempotencyKey, "ch": make(chan int)}, nil
	case Flaky:
		return nil, saga.NewError("Flaky", "try again")
	case Declined:
		return nil, saga.Permanent(saga.NewError("Declined", "no"))
	case HugeError:
		return nil, saga.NewError("Huge", strings.Repeat("e", 1<<20))
	case Panic:
		panic("action " + c.Action + " panicked on purpose")
	case Slow, SlowOK:
		t := time.NewTimer(slowest)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		time.Sleep(time.Millisecond) // past the deadline, not at it
		if b == Slow {
			return nil, ctx.Err()
		}
		return map[string]any{"id": c.IdempotencyKey, "late": true}, nil
	case EarlyOK, EarlyFail, EarlyTwice:
		d := delivery{token: c.CallbackToken, payload: a.oracle.payloadLocked()}
		if b == EarlyFail {
			d.errType, d.payload = "Declined", nil
		}
		a.oracle.deliver(context.WithoutCancel(ctx), d, true)
		if b == EarlyTwice {
			a.oracle.deliver(context.WithoutCancel(ctx), d, true)
		}
		return map[string]any{"id": c.IdempotencyKey, "early": b.String()}, nil
	case CancelSaga:
		if p := protect(func() { _, err = a.coord.Cancel(context.WithoutCancel(ctx), c.SagaID) }); p != nil {
			err = p
		}
		a.mu.Lock()
		a.cancels = append(a.cancels, err)
		a.mu.Unlock()
		return map[string]any{"id": c.IdempotencyKey, "ok": true}, nil
	}
	return c.Input, nil
}
