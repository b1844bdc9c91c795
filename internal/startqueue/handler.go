package startqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Sagas carries requests out: *engine.Coordinator, whose methods say
// what each does.
type Sagas interface {
	Start(ctx context.Context, p *engine.StartParams) (*saga.State, error)
	SignalWithStart(ctx context.Context, p *engine.SignalWithStartParams) (*engine.SignalWithStartResult, error)
	Signal(ctx context.Context, p *engine.SignalParams) (*engine.Delivered, error)
	CompleteCallback(ctx context.Context, token string, output any) (*engine.Delivered, error)
	FailCallback(ctx context.Context, token, errorType, message string) (*engine.Delivered, error)
}

var _ Sagas = (*engine.Coordinator)(nil)

// DeadLetters takes a request that will never be carried out, with the
// reason, so that it is kept for an operator rather than dropped: the
// start queue's dead-letter queue (SQSDeadLetters).
type DeadLetters interface {
	DeadLetter(ctx context.Context, l *DeadLetter) error
}

// DeadLetter is a refused request as it is kept: its body unchanged, and
// why.
type DeadLetter struct {
	Body      []byte
	MessageID string // the start queue's message id
	Kind      string // what it asked ("start", ...); empty when it could not be read
	SagaID    string // the saga it named, when it named one
	Reason    string // why it is refused: the error, never a value of the request
}

// Message is one message of the start queue as a handler gets it.
type Message struct {
	ID           string // the SQS message id: the same on every delivery of the message
	Body         []byte
	ReceiveCount int // SQS's ApproximateReceiveCount: 1 on the first delivery
}

// Verdict is what became of a message.
type Verdict int

const (
	// Done: carried out (a start or a delivery, or a no-op: a start of a
	// saga that exists with the same input, a duplicate signal): delete it.
	Done Verdict = iota
	// Refused: it can never be carried out as it is; it has been sent to
	// the dead-letter queue with its reason: delete it.
	Refused
	// Retry: it failed for now (a throttled store, a signal for a saga
	// whose start has not been read yet): report it failed, it comes back.
	Retry
)

// Outcome says what became of a message, for logs and metrics.
type Outcome struct {
	Verdict Verdict
	Kind    string // "start", "signal", "signal-with-start", "callback"; empty when unreadable
	SagaID  string
	// Receipt is what the saga did with a signal or a completion
	// (applied, kept, duplicate); empty for a start.
	Receipt saga.Receipt
	// Started: a signal with a start created the saga (a start says
	// nothing of whether it was new: a repeat is a no-op).
	Started bool
	Err     error // why it was refused or is retried; nil when done
}

// DefaultMissingRetries is how many deliveries a signal for a saga that
// does not exist gets before it is refused: the start queue is a standard
// queue, so a signal sent after a start may be read before it.
const DefaultMissingRetries = 3

// Handler carries out the start queue's messages.
type Handler struct {
	sagas   Sagas
	dead    DeadLetters
	log     *slog.Logger
	missing int
}

// Config sets up a Handler.
type Config struct {
	Sagas       Sagas       // required
	DeadLetters DeadLetters // required: a refused request goes there, never dropped
	Logger      *slog.Logger
	// MissingRetries: see DefaultMissingRetries.
	MissingRetries int
}

// New returns a handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Sagas == nil || cfg.DeadLetters == nil {
		return nil, errors.New("startqueue: Sagas and DeadLetters are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MissingRetries <= 0 {
		cfg.MissingRetries = DefaultMissingRetries
	}
	return &Handler{sagas: cfg.Sagas, dead: cfg.DeadLetters, log: cfg.Logger, missing: cfg.MissingRetries}, nil
}

// Handle carries out one message. A request refused is dead-lettered
// before Handle returns Refused; if that send fails, the outcome is Retry
// (the message comes back, and is dead-lettered then, or by the queue's
// redrive policy): a request is never dropped.
func (h *Handler) Handle(ctx context.Context, m Message) Outcome {
	out := h.carrySafely(ctx, m)
	switch out.Verdict {
	case Done:
		h.log.LogAttrs(ctx, slog.LevelInfo, "start queue request done", slog.String("kind", out.Kind), slog.String("saga_id", out.SagaID),
			slog.String("receipt", string(out.Receipt)), slog.String("message_id", m.ID))
	case Retry:
		h.log.LogAttrs(ctx, slog.LevelWarn, "start queue request not carried out; it will be delivered again", slog.String("kind", out.Kind),
			slog.String("saga_id", out.SagaID), slog.String("message_id", m.ID), slog.Int("receive_count", m.ReceiveCount), slog.String("error", out.Err.Error()))
	case Refused:
		l := &DeadLetter{Body: m.Body, MessageID: m.ID, Kind: out.Kind, SagaID: out.SagaID, Reason: out.Err.Error()}
		if err := h.dead.DeadLetter(context.WithoutCancel(ctx), l); err != nil {
			h.log.LogAttrs(ctx, slog.LevelError, "start queue request refused, but the dead-letter queue did not take it: it will be delivered again",
				slog.String("kind", out.Kind), slog.String("saga_id", out.SagaID), slog.String("message_id", m.ID), slog.String("reason", l.Reason), slog.String("error", err.Error()))
			out.Verdict = Retry
			return out
		}
		h.log.LogAttrs(ctx, slog.LevelError, "start queue request refused: moved to the dead-letter queue", slog.String("kind", out.Kind),
			slog.String("saga_id", out.SagaID), slog.String("message_id", m.ID), slog.String("reason", l.Reason))
	}
	return out
}

// errPanicked marks a request whose carrying out panicked.
var errPanicked = errors.New("panicked")

// carrySafely is carry, with a panic turned into a retry: the request
// comes back (and the redrive policy moves it after MaxReceiveCount
// deliveries) while the rest of its batch is carried out, rather than
// the whole batch failing and every request in it counting a receive.
func (h *Handler) carrySafely(ctx context.Context, m Message) (out Outcome) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		what := engine.PanicText(p)
		h.log.LogAttrs(ctx, slog.LevelError, "panic while carrying out a start queue request", slog.String("message_id", m.ID),
			slog.String("panic", what), slog.String("stack", string(debug.Stack())))
		if r, err := Parse(m.Body); err == nil {
			out.Kind, out.SagaID = r.Kind(), r.SagaID()
		}
		out.Verdict, out.Err = Retry, fmt.Errorf("%w: %s", errPanicked, what)
	}()
	return h.carry(ctx, m)
}

// carry parses and carries out m, and judges the outcome.
func (h *Handler) carry(ctx context.Context, m Message) Outcome {
	r, err := Parse(m.Body)
	if err != nil {
		return Outcome{Verdict: Refused, Err: err}
	}
	out := Outcome{Kind: r.Kind(), SagaID: r.SagaID()}
	var d *engine.Delivered
	switch {
	case r.Start != nil:
		var in map[string]any
		if in, err = decodeInput(r.Start.Input); err != nil {
			return out.refuse(err)
		}
		start := engine.StartParams{Name: r.Start.Saga, SagaID: r.Start.ID, Input: in}
		if r.Signal == nil {
			_, err = h.sagas.Start(ctx, &start)
			break
		}
		var payload any
		if payload, err = payloadOf(r.Signal.Payload, "signal.payload"); err != nil {
			return out.refuse(err)
		}
		var res *engine.SignalWithStartResult
		res, err = h.sagas.SignalWithStart(ctx, &engine.SignalWithStartParams{Start: start,
			Signal: engine.SignalParams{SagaID: r.Start.ID, Name: r.Signal.Name, Payload: payload, ID: deliveryID(r.Signal, m)}})
		if res != nil {
			d, out.Started = res.Delivered, res.Started
		}
	case r.Signal != nil:
		var payload any
		if payload, err = payloadOf(r.Signal.Payload, "signal.payload"); err != nil {
			return out.refuse(err)
		}
		d, err = h.sagas.Signal(ctx, &engine.SignalParams{SagaID: r.Signal.ID, Name: r.Signal.Name, Payload: payload, ID: deliveryID(r.Signal, m)})
		if errors.Is(err, durable.ErrNotFound) && m.ReceiveCount < h.missing {
			// Its start may be behind it in the queue.
			return Outcome{Verdict: Retry, Kind: out.Kind, SagaID: out.SagaID, Err: err}
		}
	default:
		c := r.Callback
		if ref, perr := saga.ParseCallbackToken(c.Token); perr == nil {
			out.SagaID = ref.SagaID
		}
		if c.Error != nil {
			d, err = h.sagas.FailCallback(ctx, c.Token, c.Error.Type, c.Error.Message)
			break
		}
		var output any
		if output, err = payloadOf(c.Output, "callback.output"); err != nil {
			return out.refuse(err)
		}
		d, err = h.sagas.CompleteCallback(ctx, c.Token, output)
	}
	if d != nil {
		out.Receipt = d.Receipt
	}
	if err == nil {
		return out
	}
	out.Err = err
	if refused(err) {
		out.Verdict = Refused
	} else {
		out.Verdict = Retry
	}
	return out
}

func (o Outcome) refuse(err error) Outcome {
	o.Verdict, o.Err = Refused, err
	return o
}

// refused reports whether err means the request can never be carried out
// as it is: sending it again would fail the same way. An error that also
// carries a transient cause (a throttled or conflicting write, a context
// ended) is not: the cause may be why, and a retry costs a delivery where
// a wrong refusal drops a start.
func refused(err error) bool {
	for _, e := range []error{durable.ErrThrottled, durable.ErrConflict, context.DeadlineExceeded, context.Canceled} {
		if errors.Is(err, e) {
			return false
		}
	}
	for _, e := range []error{
		ErrMalformed, durable.ErrNotFound, durable.ErrExists, saga.ErrInvalidInput,
		saga.ErrBadDelivery, saga.ErrBadToken, saga.ErrTokenNotAwaited, saga.ErrNotReceiving,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// deliveryID is a signal's delivery id: its own, or one from the SQS
// message id, which each delivery of the message carries.
func deliveryID(s *Signal, m Message) string {
	if s.Delivery != "" {
		return s.Delivery
	}
	return "sqs:" + m.ID
}

// decodeInput decodes a start's input as sagactl does: numbers exactly,
// then the plain values a saga holds.
func decodeInput(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	v, err := decodeValue(raw, "start.input")
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, bad("start.input", "must be a JSON object")
	}
	return m, nil
}

// payloadOf is a signal's payload or a callback's output: the JSON as
// sent (the engine decodes it and checks its size); null when absent.
func payloadOf(raw json.RawMessage, field string) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if _, err := decodeValue(raw, field); err != nil {
		return nil, err
	}
	return raw, nil
}

func decodeValue(raw json.RawMessage, field string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, bad(field, "not valid JSON")
	}
	norm, err := saga.NormalizeJSON(v)
	if err != nil {
		return nil, &RequestError{Field: field, Problem: err.Error()}
	}
	return norm, nil
}

// String names a verdict, for logs and tests.
func (v Verdict) String() string {
	switch v {
	case Done:
		return "done"
	case Refused:
		return "refused"
	case Retry:
		return "retry"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}
