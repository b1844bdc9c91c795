package lambdasaga

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memobjects"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/redrive"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// LocalOptions tune a Local.
type LocalOptions struct {
	// VirtualTime runs the sagas on a clock of their own, starting at
	// Now, that moves on to the next thing due whenever nothing is in
	// flight: a wait of 30 days, or long retry backoffs, take
	// milliseconds. An await's or a callback's timeout passes only while
	// someone is in Run or Wait, so a test can see a saga waiting
	// (WaitReceiving) and send what it waits on first.
	VirtualTime bool
	Now         time.Time // VirtualTime's start; zero: now
	// Workers per queue; default 2.
	Workers int
	// Logger gets the runtime's lines; default: none.
	Logger *slog.Logger
	// Store, Queue and Receiver run the sagas on a backend of yours (the
	// DynamoDB and SQS adapters on the emulators, say) instead of memory:
	// all three, with the workers polling like Lambda's event source
	// mapping. Not with VirtualTime.
	Store    durable.Store
	Queue    durable.Queue    // the sending side of the queues Receiver reads
	Receiver durable.Receiver // the workers receive from it
	// Visibility is how long a message stays hidden while handled before
	// it is delivered again; default 30s.
	Visibility time.Duration
	// PollInterval is how often Wait reads a saga; default 2ms.
	PollInterval time.Duration
	// Objects, when set, keeps each value larger than OffloadBytes (an
	// input field, an action's output) as an object there, the saga's
	// state holding a reference: each value up to 32 MiB, an input up to
	// 32 MiB. Actions and expressions see values. NewMemoryObjects keeps
	// them in this process; nil: every value inline, within the state's
	// limit (300 KiB).
	Objects durable.Objects
	// OffloadBytes is the size over which Objects keeps a value; default
	// 8 KiB.
	OffloadBytes int
}

// NewMemoryObjects returns an object store in memory, for
// LocalOptions.Objects: the values it keeps end with the process.
func NewMemoryObjects() durable.Objects { return memobjects.New() }

// Local runs sagas in this process, through the protocol the Lambda
// functions run (the memory store and queue, a worker per queue): for
// tests, and for tools. Its Client starts, reads and signals them.
type Local struct {
	*Client
	rt *embedded.Runtime
}

// NewLocal starts a local runtime with actions. Call Close when done.
func NewLocal(actions *Actions, o LocalOptions) (*Local, error) {
	if actions == nil {
		return nil, errors.New("lambdasaga: NewLocal needs actions")
	}
	var clock durable.Clock = durable.SystemClock{}
	if o.VirtualTime {
		now := o.Now
		if now.IsZero() {
			now = time.Now()
		}
		clock = durable.NewManualClock(now)
	}
	cfg := embedded.Config{Actions: actions.reg, Workers: o.Workers, Logger: o.Logger, Clock: clock,
		Store: o.Store, Queue: o.Queue, Receiver: o.Receiver, Visibility: o.Visibility, PollInterval: o.PollInterval,
		Objects: o.Objects, OffloadBytes: o.OffloadBytes}
	rt, err := embedded.Start(cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{coord: rt.Coordinator, plans: engine.NewPlans(rt.Store, saga.Options{}), rt: rt, clock: clock}
	if mq, ok := rt.Queue.(*memqueue.Queue); ok {
		c.deadLetters = &redrive.MemoryQueues{Queue: mq}
	}
	return &Local{Client: c, rt: rt}, nil
}

// Run starts a saga of def and waits until it ends (succeeded or
// compensated), parks (compensation_failed) or is held (held: a step
// failed and the definition says on_failure: hold), or ctx ends.
func (l *Local) Run(ctx context.Context, def *Definition, o StartOptions) (*Saga, error) {
	s, err := l.Start(ctx, def, o)
	if err != nil {
		return nil, err
	}
	return l.Wait(ctx, s.ID)
}

// Wait waits until the saga ends, parks or is held, or ctx ends (its
// error then, with the saga as it was).
func (l *Local) Wait(ctx context.Context, id string) (*Saga, error) {
	st, err := l.rt.Wait(ctx, id)
	return l.view(ctx, st), err
}

// WaitReceiving waits until the saga (or a run of its tree) waits on a
// signal or a callback, or ends.
func (l *Local) WaitReceiving(ctx context.Context, id string) (*Saga, error) {
	st, err := l.rt.WaitReceiving(ctx, id)
	return l.view(ctx, st), err
}

// Close stops the workers and waits for them.
func (l *Local) Close() { l.rt.Close() }
