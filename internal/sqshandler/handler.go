// Package sqshandler is the body of both Lambda functions: it handles a
// batch of SQS records through the coordinator and reports the records that
// must come back (ReportBatchItemFailures). It watches the invocation
// deadline and hands records it will not reach back to the queue rather
// than being cut off in the middle of a step.
package sqshandler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/emf"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
	"github.com/lambdasaga/lambdasaga/queue/sqsqueue"
)

// DefaultMargin is how much of the invocation's time a record needs to
// start: with less left it is handed back for redelivery. The coordinator
// keeps saga.ResultReserve of it to record the outcome; the rest is the
// least an action gets.
const DefaultMargin = 3 * time.Second

// Config sets up a Handler.
type Config struct {
	Coordinator *engine.Coordinator // handles each record; required
	// Logger gets a line per batch and per record not handled; default:
	// discard. The coordinator logs to its own.
	Logger *slog.Logger
	// Margin: see DefaultMargin.
	Margin time.Duration
	// Metrics, when set, counts what each batch did and writes it as
	// embedded metric format lines before Handle returns. For the step
	// and saga metrics and the conflicts, the coordinator must have been
	// built with its OnStep and its Store (FromEnvironment does that).
	Metrics *emf.Recorder
	// Traces, when set, exports the spans of each batch before Handle
	// returns (the coordinator opens them: engine.CoordinatorConfig.Tracer).
	Traces SpanFlusher
	// Start, when set, carries out the records of the start queue named
	// StartQueue (docs/START_QUEUE.md): a record whose event source ARN
	// ends in ":"+StartQueue is a request, not a saga's message.
	Start      *startqueue.Handler
	StartQueue string
}

// Handler handles SQS batches.
type Handler struct {
	coord   *engine.Coordinator
	log     *slog.Logger
	margin  time.Duration
	metrics *emf.Recorder
	traces  SpanFlusher
	start   *startqueue.Handler
	// startARNSuffix is ":" and the start queue's name: the end of its ARN.
	startARNSuffix string
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
	if (cfg.Start == nil) != (cfg.StartQueue == "") {
		return nil, errors.New("sqshandler: Start and StartQueue go together")
	}
	h := &Handler{coord: cfg.Coordinator, log: cfg.Logger, margin: cfg.Margin, metrics: cfg.Metrics, traces: cfg.Traces, start: cfg.Start}
	if cfg.Start != nil {
		h.startARNSuffix = ":" + cfg.StartQueue
	}
	return h, nil
}

// Handle processes the batch in order. Records that failed, that are
// malformed (they reach the dead-letter queue untouched after the queue's
// receive limit), or that the deadline leaves no time for are reported as
// batch item failures; the rest are deleted by Lambda. A panic while
// handling one record fails that record alone.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		// What a fresh invocation has: a record whose step timeout fits
		// that but not what is left is handed back, not cut short.
		ctx = engine.WithInvocationBudget(ctx, time.Until(deadline))
	}
	var failed []string
	batchSize := len(ev.Records) // each record's share of the invocation
	if reqs, rest := h.splitRequests(ev.Records); len(reqs) > 0 {
		// Each record is known by its own queue: an event source
		// mapping's batch comes from one, but a batch put together
		// otherwise must not dead-letter a saga's message as a malformed
		// request, nor fail a request as a malformed message.
		failed = h.handleRequests(ctx, reqs)
		if len(rest) == 0 {
			h.flush(ctx)
			return sqsqueue.BatchResponse(failed), nil
		}
		ev.Records = rest
	}
	recs := sqsqueue.Records(ev)
	// A chain gives way to the records waiting behind it.
	var batch engine.Batch
	ctx = engine.WithBatch(ctx, &batch)
	handled, handedBack := 0, 0
	for i, r := range recs {
		if engine.NoTimeToStart(ctx, h.margin) {
			for _, rest := range recs[i:] {
				if rest.Err == nil && h.handBack(ctx, rest) {
					handedBack++
					h.count(emf.HandedBack)
					continue
				}
				failed = append(failed, rest.MessageID)
				h.count(failure(rest.Err))
			}
			h.log.LogAttrs(ctx, slog.LevelWarn, "invocation deadline near: records handed back for a fresh invocation",
				slog.Int("records", len(recs)-i), slog.Duration("left", time.Until(deadline)))
			break
		}
		if r.Err != nil {
			h.log.LogAttrs(ctx, slog.LevelError, poisonMessage,
				slog.String("message_id", r.MessageID), slog.Int("receive_count", r.ReceiveCount), slog.String("error", r.Err.Error()))
			failed = append(failed, r.MessageID)
			h.count(emf.Malformed)
			continue
		}
		// The coordinator ends the action saga.ResultReserve before the
		// deadline, so that its outcome is written and sent in time.
		batch.Waiting = len(recs) - i - 1
		var start time.Time
		if h.metrics != nil {
			start = h.metrics.Now()
		}
		err := h.handleRecord(ctx, r)
		if h.metrics != nil {
			h.metrics.Charge(r.Message.SagaID, start, batchSize)
		}
		if errors.Is(err, engine.ErrNoTime) && h.handBack(ctx, r) {
			handedBack++
			h.count(emf.HandedBack)
			continue
		}
		if err != nil {
			failed = append(failed, r.MessageID)
			h.count(failure(err))
			if errors.Is(err, errPanicked) {
				continue // logged with its stack
			}
			level, msg := slog.LevelWarn, "message not handled; it will be delivered again"
			if poison(err) {
				level, msg = slog.LevelError, poisonMessage
			}
			h.log.LogAttrs(ctx, level, msg,
				slog.String("message_id", r.MessageID), slog.String("saga_id", r.Message.SagaID), slog.String("step", r.Message.Step),
				slog.Uint64("version", r.Message.Version), slog.Int("receive_count", r.ReceiveCount), slog.String("error", err.Error()))
			continue
		}
		handled++
		h.count(emf.Handled)
	}
	h.log.LogAttrs(ctx, slog.LevelInfo, "batch done", slog.Int("records", len(recs)), slog.Int("handled", handled), slog.Int("handed_back", handedBack), slog.Int("failed", len(failed)))
	h.flush(ctx)
	return sqsqueue.BatchResponse(failed), nil
}

// splitRequests returns the records of the start queue and the others;
// none and recs, without allocating, when there is no start queue or no
// record of it.
func (h *Handler) splitRequests(recs []events.SQSMessage) (reqs, rest []events.SQSMessage) {
	if h.start == nil || !slices.ContainsFunc(recs, h.isRequest) {
		return nil, recs
	}
	for _, r := range recs {
		if h.isRequest(r) {
			reqs = append(reqs, r)
		} else {
			rest = append(rest, r)
		}
	}
	return reqs, rest
}

// isRequest reports whether r comes from the start queue: its event
// source ARN ends with the queue's name.
func (h *Handler) isRequest(r events.SQSMessage) bool {
	return strings.HasSuffix(r.EventSourceARN, h.startARNSuffix)
}

// handleRequests carries out records of the start queue: each a request.
// One refused is dead-lettered by the start queue's handler and then
// deleted; one to retry is reported failed (its id returned) and comes
// back.
func (h *Handler) handleRequests(ctx context.Context, recs []events.SQSMessage) []string {
	var failed []string
	for _, r := range recs {
		if engine.NoTimeToStart(ctx, h.margin) {
			failed = append(failed, r.MessageId)
			h.count(emf.Failed)
			continue
		}
		n, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
		out := h.start.Handle(ctx, startqueue.Message{ID: r.MessageId, Body: []byte(r.Body), ReceiveCount: n})
		switch out.Verdict {
		case startqueue.Done:
			h.count(emf.Handled)
		case startqueue.Refused:
			h.count(emf.Refused)
		default:
			failed = append(failed, r.MessageId)
			h.count(emf.Failed)
		}
	}
	return failed
}

// flush writes the batch's metrics and exports its spans.
func (h *Handler) flush(ctx context.Context) {
	if h.metrics != nil {
		if err := h.metrics.Flush(); err != nil {
			h.log.LogAttrs(ctx, slog.LevelWarn, "metrics not written", slog.String("error", err.Error()))
		}
	}
	if h.traces != nil {
		if err := h.traces.ForceFlush(ctx); err != nil {
			h.log.LogAttrs(ctx, slog.LevelWarn, "spans not exported", slog.String("error", err.Error()))
		}
	}
}

// count tells the metrics what became of a record.
func (h *Handler) count(what emf.Record) {
	if h.metrics != nil {
		h.metrics.Count(what)
	}
}

// failure is what a record that failed with err comes to: malformed when
// it can never be handled (it is bound for the dead-letter queue), else
// failed (it comes back).
func failure(err error) emf.Record {
	if poison(err) {
		return emf.Malformed
	}
	return emf.Failed
}

// poison reports whether a record that failed with err can never be
// handled.
func poison(err error) bool {
	return errors.Is(err, durable.ErrMalformedMessage) || errors.Is(err, engine.ErrDamagedState)
}

// handBack sends r's message again for a fresh invocation, so that r can be
// deleted without spending a receive toward the dead-letter queue; false if
// the send failed (then r is reported failed and comes back on its own).
func (h *Handler) handBack(ctx context.Context, r sqsqueue.Record) bool {
	if err := h.coord.HandBack(context.WithoutCancel(ctx), r.Message); err != nil {
		h.log.LogAttrs(ctx, slog.LevelWarn, "hand back failed: record reported failed", slog.String("message_id", r.MessageID), slog.String("error", err.Error()))
		return false
	}
	return true
}

// poisonMessage is logged for a record that can never be handled: a body
// that is no message, a saga that does not exist, a message for another
// queue or step. It keeps failing until the queue's redrive policy moves it.
const poisonMessage = "poison message: reported failed; it goes to the dead-letter queue after maxReceiveCount deliveries"

// errPanicked is a record whose handling panicked. It comes back, and
// reaches the dead-letter queue if it keeps panicking.
var errPanicked = errors.New("handling the record panicked")

// handleRecord runs one record through the coordinator. A panic (a bug,
// a damaged state item, a panicking expression) is recovered, logged with
// the saga's id and a stack, and returned as the record's failure, so the
// other records of the batch are handled as usual.
func (h *Handler) handleRecord(ctx context.Context, r sqsqueue.Record) (err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		what := engine.PanicText(p)
		h.log.LogAttrs(ctx, slog.LevelError, "panic while handling a record: reported failed; it will be delivered again, and goes to the dead-letter queue after maxReceiveCount deliveries",
			slog.String("message_id", r.MessageID), slog.String("saga_id", r.Message.SagaID), slog.String("step", r.Message.Step),
			slog.Uint64("version", r.Message.Version), slog.Int("receive_count", r.ReceiveCount),
			slog.String("panic", what), slog.String("stack", string(debug.Stack())))
		err = fmt.Errorf("saga %s: %w: %s", r.Message.SagaID, errPanicked, what)
	}()
	_, err = h.coord.HandleMessage(ctx, r.Message)
	return err
}
