package durable

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// ErrLimited: a call would go over its action's limit (a rate window
// full, a concurrency slot held). Nothing was changed; try later.
var ErrLimited = errors.New("over the action's limit")

// Limit is how often, and how many at once, the calls of one action may
// run, across every saga and every worker: the engine defers a call over
// it (docs/PROTOCOL.md, "Limits").
type Limit struct {
	Action string // the action's name, as definitions write it
	// Rate is calls per second; 0: no rate limit. Burst calls may start
	// in each window of Burst/Rate seconds, so any interval of T seconds
	// sees at most Rate*T + Burst calls start.
	Rate int
	// Burst is the calls a window allows; 0: the store keeps 0, and the
	// engine takes DefaultBurst(Rate).
	Burst int
	// Concurrency is the calls in flight at once; 0: unbounded.
	Concurrency int
}

// Limits the engine and sagactl accept: a rate's window is one
// counter, one partition key, which DynamoDB caps at 1,000 write units a
// second (docs/COST.md, "Limits"), denied calls included.
const (
	MaxLimitRate        = 500
	MaxLimitBurst       = 500
	MaxLimitConcurrency = 100
	// MaxLimitActionBytes bounds a limit's action name: longer than any
	// action a definition may call (a Go action's 128, a Lambda ARN with
	// its qualifier), well within a partition key's 2,048 bytes.
	MaxLimitActionBytes = 256
)

// DefaultBurst is the burst of a rate limit set without one: a tenth of
// the rate, at least 1, so that a window is about 100 ms.
func DefaultBurst(rate int) int {
	return max(1, (rate+9)/10)
}

// Window is how long one window of a rate limit lasts: Burst/Rate
// seconds (Burst defaulted); zero without a rate.
func (l Limit) Window() time.Duration {
	if l.Rate <= 0 {
		return 0
	}
	b := l.Burst
	if b <= 0 {
		b = DefaultBurst(l.Rate)
	}
	return time.Duration(b) * time.Second / time.Duration(l.Rate)
}

// Check reports what is wrong with l, for an operator.
func (l Limit) Check() error {
	switch {
	case l.Action == "":
		return errors.New("limit: an action is required")
	case len(l.Action) > MaxLimitActionBytes:
		return fmt.Errorf("limit: an action name of %d bytes is longer than any action's (at most %d)", len(l.Action), MaxLimitActionBytes)
	case strings.ContainsFunc(l.Action, unicode.IsControl):
		return errors.New("limit: an action name holds no control characters")
	case l.Rate < 0 || l.Burst < 0 || l.Concurrency < 0:
		return fmt.Errorf("limit of %s: rate, burst and concurrency are not negative", l.Action)
	case l.Rate == 0 && l.Concurrency == 0:
		return fmt.Errorf("limit of %s: a rate or a concurrency is required (to remove a limit, unset it)", l.Action)
	case l.Burst > 0 && l.Rate == 0:
		return fmt.Errorf("limit of %s: a burst needs a rate", l.Action)
	case l.Rate > MaxLimitRate:
		return fmt.Errorf("limit of %s: a rate of %d/s is over the %d/s one DynamoDB key takes with room for the calls it defers (docs/COST.md, \"Limits\")", l.Action, l.Rate, MaxLimitRate)
	case l.Burst > MaxLimitBurst:
		return fmt.Errorf("limit of %s: a burst of %d is over %d", l.Action, l.Burst, MaxLimitBurst)
	case l.Concurrency > MaxLimitConcurrency:
		return fmt.Errorf("limit of %s: a concurrency of %d is over %d", l.Action, l.Concurrency, MaxLimitConcurrency)
	}
	return nil
}

// LimitPutParams sets one action's limit, replacing any it had.
type LimitPutParams struct {
	Limit Limit // checked (Limit.Check) by the caller
}

// LimitDeleteParams removes one action's limit.
type LimitDeleteParams struct {
	Action string // the action whose limit goes
}

// LimitListParams reads every limit.
type LimitListParams struct {
	// Consistent asks for a strongly consistent read (an operator's
	// listing); the engine's cached read is eventually consistent.
	Consistent bool
}

// LimitTakeParams counts one call in a rate limit's window.
type LimitTakeParams struct {
	Action string // the limited action
	Window int64  // the window's number: the time since the Unix epoch divided by its length
	Max    int    // the calls the window allows
	// Expires is when the window's counter may be deleted (a store's
	// TTL); it is never read again after its window ends.
	Expires time.Time
}

// LimitLeaseParams takes one of an action's concurrency slots for a call.
type LimitLeaseParams struct {
	Action string    // the limited action
	Slot   int       // 0 to the concurrency - 1
	Holder string    // the call's idempotency key: the holder that may take it again and release it
	Now    time.Time // the caller's time: a lease whose Until is before it has lapsed
	// Until is when the lease lapses if never released: the call's
	// timeout and its reserve after Now, so a worker that dies leaves no
	// slot held for ever.
	Until time.Time
}

// LimitReleaseParams gives a concurrency slot back.
type LimitReleaseParams struct {
	Action string // the limited action
	Slot   int    // the slot leased
	Holder string // released only if this holder still has it
}

// Limiter is the optional part of a Store that keeps action limits and
// the shared state that enforces them; the engine finds it by type
// assertion, and a store without it runs every action unlimited.
// storetest's Limits area is the contract. Safe for concurrent use.
type Limiter interface {
	// LimitPut stores p.Limit for its action, replacing any other.
	LimitPut(ctx context.Context, p *LimitPutParams) error
	// LimitDelete removes the action's limit: ErrNotFound when it has none.
	LimitDelete(ctx context.Context, p *LimitDeleteParams) error
	// LimitList returns every limit, by action name.
	LimitList(ctx context.Context, p *LimitListParams) ([]Limit, error)
	// LimitTake counts one call in the window if it has counted fewer
	// than p.Max: ErrLimited when it is full (nothing counted).
	LimitTake(ctx context.Context, p *LimitTakeParams) error
	// LimitLease takes the slot for p.Holder if it is free, lapsed
	// (its Until before p.Now) or held by p.Holder already: ErrLimited
	// when another holder has it.
	LimitLease(ctx context.Context, p *LimitLeaseParams) error
	// LimitRelease frees the slot if p.Holder holds it; nil when it does
	// not (released already, or lapsed and taken by another).
	LimitRelease(ctx context.Context, p *LimitReleaseParams) error
}

// Describe says what l allows, for an operator: "50 calls/s (5 per 100ms
// window), 5 at once".
func (l Limit) Describe() string {
	var parts []string
	if l.Rate > 0 {
		b := l.Burst
		if b <= 0 {
			b = DefaultBurst(l.Rate)
		}
		parts = append(parts, fmt.Sprintf("%d calls/s (%d per %s window)", l.Rate, b, l.Window()))
	}
	if l.Concurrency > 0 {
		parts = append(parts, fmt.Sprintf("%d at once", l.Concurrency))
	}
	return strings.Join(parts, ", ")
}
