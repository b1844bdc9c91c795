package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// WorkerConfig sets up a worker that consumes one queue in process, as
// Lambda's event source mapping does in AWS.
type WorkerConfig struct {
	Coordinator *Coordinator      // handles each message; required
	Receiver    durable.Receiver  // receives and deletes the messages; required
	Queue       durable.QueueName // the queue to consume
	// Batch is how many messages one receive asks for (1 to 10); default 10.
	Batch int
	// Wait is the long-poll wait of one receive; default 20ms.
	Wait time.Duration
	// Visibility hides received messages while they are handled; default:
	// the queue's. A chain stops starting steps at half of it.
	Visibility time.Duration
	// Logger gets a line for each failed receive, message not handled and
	// failed delete; default: discard. The coordinator logs to its own.
	Logger *slog.Logger
}

// RunWorker receives and handles messages until ctx ends. A handled message
// is deleted; one that failed is left to come back after its visibility
// timeout, and a malformed one keeps failing until the queue moves it to
// its dead-letter queue, untouched. It returns ctx's error.
//
// Stopping is graceful: a receive under way is not cancelled (a long poll
// cut off can still be handed a message, which would then stay hidden for
// its visibility timeout); it finishes within Wait, and what it brought is
// handled before RunWorker returns.
func RunWorker(ctx context.Context, cfg WorkerConfig) error {
	if cfg.Batch == 0 {
		cfg.Batch = 10
	}
	if cfg.Wait == 0 {
		cfg.Wait = 20 * time.Millisecond
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	calm := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(calm, cfg.Wait+30*time.Second)
		ds, err := cfg.Receiver.Receive(rctx, &durable.ReceiveParams{Queue: cfg.Queue, Max: cfg.Batch, Wait: cfg.Wait, Visibility: cfg.Visibility})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				log.LogAttrs(ctx, slog.LevelWarn, "receive failed", slog.String("queue", string(cfg.Queue)), slog.String("error", err.Error()))
				sleep(ctx, cfg.Wait)
			}
			continue
		}
		batch := Batch{Visibility: cfg.Visibility, Received: cfg.Coordinator.cfg.Clock.Now()}
		wctx := WithBatch(calm, &batch)
		for i, d := range ds {
			batch.Waiting = len(ds) - i - 1
			handleDelivery(wctx, cfg.Coordinator, cfg.Receiver, d, log)
		}
	}
	return ctx.Err()
}

// handleDelivery handles one received message and deletes it if it is done.
// It reports whether it was. A nil log discards.
func handleDelivery(ctx context.Context, c *Coordinator, r durable.Receiver, d durable.Delivery, log *slog.Logger) bool {
	if log == nil {
		log = c.log
	}
	_, err := safeHandle(ctx, c, d.Body)
	if err != nil {
		level, what := slog.LevelWarn, "message not handled; it will be delivered again"
		if errors.Is(err, durable.ErrMalformedMessage) || errors.Is(err, ErrDamagedState) || errors.Is(err, errPanicked) {
			level, what = slog.LevelError, "message cannot be handled; it goes to the dead-letter queue after the queue's maxReceiveCount deliveries"
		}
		log.LogAttrs(ctx, level, what,
			slog.String("queue", string(d.Queue)), slog.String("message_id", d.MessageID),
			slog.Int("receive_count", d.ReceiveCount), slog.String("error", err.Error()))
		return false
	}
	if err := r.Delete(ctx, &durable.DeleteParams{Queue: d.Queue, ReceiptHandle: d.ReceiptHandle}); err != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "delete failed; the message will be delivered again and dropped as a duplicate",
			slog.String("message_id", d.MessageID), slog.String("error", err.Error()))
	}
	return true
}

// errPanicked marks a message whose handling panicked.
var errPanicked = errors.New("handling panicked")

// safeHandle is Handle with a panic turned into this message's failure
// alone, so one bad record cannot stop a worker or its batch.
func safeHandle(ctx context.Context, c *Coordinator, body []byte) (out Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			id := ""
			if m, derr := durable.DecodeMessage(body); derr == nil {
				id = m.SagaID
			}
			err = fmt.Errorf("saga %s: %w: %s", id, errPanicked, PanicText(r))
		}
	}()
	return c.Handle(ctx, body)
}

// PanicText describes a recovered panic for logs and stored failures:
// the runtime's own text (index out of range, nil map), or only the type of
// a value passed to panic, which may hold saga data.
func PanicText(r any) string {
	if re, ok := r.(runtime.Error); ok {
		return re.Error()
	}
	return fmt.Sprintf("a panic with a %T", r)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
