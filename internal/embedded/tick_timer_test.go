package embedded_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// outcomes counts the coordinator's "message handled" records by outcome.
type outcomes struct {
	resent, timer, early atomic.Int64
}

func (o *outcomes) Enabled(context.Context, slog.Level) bool { return true }
func (o *outcomes) WithAttrs([]slog.Attr) slog.Handler       { return o }
func (o *outcomes) WithGroup(string) slog.Handler            { return o }
func (o *outcomes) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "outcome" {
			switch engine.Outcome(a.Value.String()) {
			case engine.HandledResent:
				o.resent.Add(1)
			case engine.HandledTimer:
				o.timer.Add(1)
			case engine.HandledEarly:
				o.early.Add(1)
			}
		}
		return true
	})
	return nil
}

const shortWait = `saga: short
steps:
  - id: open
    action: accounts.open
  - id: pause
    wait: {for: 600ms}
  - id: bill
    action: payments.charge
`

// runShortWait runs one saga whose wait is within a queue's delay (its
// own message) and reports what its messages did.
func runShortWait(t *testing.T, cfg embedded.Config) (*outcomes, int64) {
	t.Helper()
	o := &outcomes{}
	var bills atomic.Int64
	actions := engine.NewRegistry()
	actions.SetFallback(func(ctx context.Context, call saga.Call) (any, error) {
		if call.Step == "bill" {
			bills.Add(1)
		}
		return map[string]any{}, nil
	})
	cfg.Actions, cfg.Logger = actions, slog.New(o)
	rt, err := embedded.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	plan, err := saga.Compile("short.yaml", []byte(shortWait), saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := rt.Run(ctx, &engine.StartParams{Plan: plan, SagaID: "s-1"})
	if err != nil || st.Status != durable.StatusSucceeded {
		t.Fatalf("run: %v %v", st, err)
	}
	time.Sleep(200 * time.Millisecond) // let the copies in flight be handled
	return o, bills.Load()
}

// The embedded runtime ticks every TickInterval (default 1s) with the
// tick's default Ahead of a minute, so every tick in a timer's last
// minute sends it one more message: about 60 copies with the defaults
// (here, a 600ms wait and a 20ms tick, about 30). The timer fires once,
// but each later copy finds the saga a version on and re-sends that
// version's outbox (bill's message): the saga's next step is delivered
// again and again.
func TestEmbeddedTicksDoNotFloodATimerWithCopies(t *testing.T) {
	o, bills := runShortWait(t, embedded.Config{Workers: 2, TickInterval: 20 * time.Millisecond})
	if o.timer.Load() != 1 || o.resent.Load() > 1 {
		t.Fatalf("timer fired %d times, %d copies re-sent the next version's outbox, bill ran %d times: want one firing and at most one stray copy",
			o.timer.Load(), o.resent.Load(), bills)
	}
}

// In virtual time the runtime moves the clock to a short wait's own
// message and then ticks, which sends the timer a second message: the
// copy re-sends bill's message.
func TestEmbeddedVirtualTimeSendsATimerOnce(t *testing.T) {
	o, bills := runShortWait(t, embedded.Config{Workers: 1, Clock: durable.NewManualClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))})
	if o.timer.Load() != 1 || o.resent.Load() != 0 {
		t.Fatalf("timer fired %d times, %d copies re-sent the next version's outbox, bill ran %d times: want one firing, no copy",
			o.timer.Load(), o.resent.Load(), bills)
	}
}
