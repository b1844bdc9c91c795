// Package sqshandler is the body of both Lambda functions: it handles a
// batch of SQS records through the coordinator and reports the records that
// must come back (ReportBatchItemFailures). It watches the invocation
// deadline and hands records it will not reach back to the queue rather
// than being cut off in the middle of a step.
package sqshandler

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/queue/sqs"
)

// DefaultMargin is how much of the invocation's time is kept back: no
// record starts with less left, and steps must end this much before the
// deadline.
const DefaultMargin = 3 * time.Second

// Config sets up a Handler.
type Config struct {
	Coordinator *engine.Coordinator
	Logger      *slog.Logger
	// Margin: see DefaultMargin.
	Margin time.Duration
}

// Handler handles SQS batches.
type Handler struct {
	coord  *engine.Coordinator
	log    *slog.Logger
	margin time.Duration
}

// New returns a handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Coordinator == nil {
		return nil, errors.New("sqshandler: a Coordinator is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Margin == 0 {
		cfg.Margin = DefaultMargin
	}
	return &Handler{coord: cfg.Coordinator, log: cfg.Logger, margin: cfg.Margin}, nil
}

// Handle processes the batch in order. Records that failed, that are
// malformed (they reach the dead-letter queue untouched after the queue's
// receive limit), or that the deadline leaves no time for are reported as
// batch item failures; the rest are deleted by Lambda.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	deadline, hasDeadline := ctx.Deadline()
	recs := sqs.Records(ev)
	var failed []string
	handled := 0
	for i, r := range recs {
		if hasDeadline && time.Until(deadline) < h.margin {
			for _, rest := range recs[i:] {
				failed = append(failed, rest.MessageID)
			}
			h.log.LogAttrs(ctx, slog.LevelWarn, "invocation deadline near: records handed back for redelivery",
				slog.Int("records", len(recs)-i), slog.Duration("left", time.Until(deadline)))
			break
		}
		if r.Err != nil {
			h.log.LogAttrs(ctx, slog.LevelError, "malformed message: reported failed, it will reach the dead-letter queue untouched",
				slog.String("message_id", r.MessageID), slog.Int("receive_count", r.ReceiveCount), slog.String("error", r.Err.Error()))
			failed = append(failed, r.MessageID)
			continue
		}
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if hasDeadline {
			rctx, cancel = context.WithDeadline(ctx, deadline.Add(-h.margin/2))
		}
		_, err := h.coord.Handle(rctx, r.Body)
		cancel()
		if err != nil {
			h.log.LogAttrs(ctx, slog.LevelWarn, "message not handled; it will be delivered again",
				slog.String("message_id", r.MessageID), slog.String("saga_id", r.Message.SagaID), slog.String("step", r.Message.Step),
				slog.Uint64("version", r.Message.Version), slog.Int("receive_count", r.ReceiveCount), slog.String("error", err.Error()))
			failed = append(failed, r.MessageID)
			continue
		}
		handled++
	}
	h.log.LogAttrs(ctx, slog.LevelInfo, "batch done", slog.Int("records", len(recs)), slog.Int("handled", handled), slog.Int("failed", len(failed)))
	return sqs.BatchResponse(failed), nil
}
