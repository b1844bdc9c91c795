package engine

import (
	"context"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Tracer opens the spans of what a Coordinator does, when
// CoordinatorConfig.Tracer is set: one for a saga's start, one for each
// message it handles (a step), and inside that one for each action or
// compensation it calls. A saga keeps the trace context of its first span
// in its state (saga.State.Trace), and every later span of it descends
// from that one, so that all the invocations that handle its messages add
// to one trace. Package otelsaga implements it with OpenTelemetry. Without
// a Tracer the coordinator opens no span and allocates nothing for one.
type Tracer interface {
	// StartSpan opens a span as a child of parent or, when parent is zero,
	// of the span ctx carries (the root of a new trace when it carries
	// none). It returns ctx carrying the new span, for the spans opened
	// inside it and the log lines written in it. It never fails: a tracer
	// that cannot record returns a span that records nothing.
	StartSpan(ctx context.Context, parent saga.TraceContext, p SpanParams) (context.Context, Span)
}

// Span is a span a Tracer opened. Its methods are called from the
// goroutine that opened it.
type Span interface {
	// TraceContext is the span's own identifiers: a saga keeps them so
	// that its later spans descend from this one.
	TraceContext() saga.TraceContext
	// End closes the span with what came of it.
	End(e SpanEnd)
}

// SpanKind says what a span covers.
type SpanKind string

// The spans a Coordinator opens.
const (
	SpanSaga    SpanKind = "saga"    // a saga's start: the steps it ran before its first write
	SpanMessage SpanKind = "message" // one queue message handled: a step, a timer, a fork's news
	SpanAction  SpanKind = "action"  // one call of an action, or of a compensation (Compensation)
)

// SpanKinds lists every SpanKind.
func SpanKinds() []SpanKind { return []SpanKind{SpanSaga, SpanMessage, SpanAction} }

// SpanParams describes a span as it opens. Times come from the
// coordinator's clock.
type SpanParams struct {
	Kind     SpanKind // what the span covers
	SagaID   string   // the saga's id (a child run's for its spans)
	SagaName string   // its definition's name
	// Step is the step the message or call is for; empty for a saga's
	// start.
	Step string
	// Attempt is the step's attempt, 1-based; 0 for a saga's start.
	Attempt int
	// Version is the saga's version the message names (for a start, 1).
	Version uint64
	// Message is the kind of the message handled (SpanMessage); empty for
	// a step's message.
	Message durable.MessageKind
	// Action is the action called (SpanAction).
	Action string
	// Compensation marks a compensation: its message, or its call.
	Compensation bool
	// Start is when the span began.
	Start time.Time
}

// SpanEnd is what came of a span.
type SpanEnd struct {
	// Outcome is, for a message, what Handle did with it (an Outcome); for
	// a call, "succeeded" or "failed"; for a start, the saga's status.
	Outcome string
	// Version is the saga's version once the span's work is done (0 if
	// unknown: the saga could not be read).
	Version uint64
	// Status is the saga's status then; empty if unknown.
	Status durable.Status
	// Err is why the span's work failed; nil if it did not.
	Err error
	// End is when the span ended.
	End time.Time
}

// Outcomes of an action call's span.
const (
	CallSucceeded = "succeeded"
	CallFailed    = "failed"
)

// messageSpan is the span of the message Handle is working on. It opens
// once the saga is read, since its parent is in the saga's state; Handle
// ends it, and opens it then if no read came first (the saga is missing,
// the store failed), so that the error is seen.
type messageSpan struct {
	msg     durable.Message
	began   time.Time
	ctx     context.Context // carries span, once open
	span    Span
	name    string
	version uint64
	status  durable.Status
}

type messageSpanKey struct{}

// traced is Handle with a message span around the handling of msg.
func (c *Coordinator) traced(ctx context.Context, msg durable.Message, handle func(context.Context, durable.Message) (Outcome, error)) (Outcome, error) {
	ms := &messageSpan{msg: msg, began: c.cfg.Clock.Now()}
	outcome, err := c.retrying(context.WithValue(ctx, messageSpanKey{}, ms), msg, handle)
	if ms.span == nil {
		_, ms.span = c.cfg.Tracer.StartSpan(ctx, saga.TraceContext{}, c.messageParams(ms))
	}
	ms.span.End(SpanEnd{Outcome: string(outcome), Version: ms.version, Status: ms.status, Err: err, End: c.cfg.Clock.Now()})
	return outcome, err
}

func (c *Coordinator) messageParams(ms *messageSpan) SpanParams {
	m := ms.msg
	return SpanParams{Kind: SpanMessage, SagaID: m.SagaID, SagaName: ms.name, Step: m.Step, Attempt: m.Attempt, Version: m.Version,
		Message: m.Kind, Compensation: m.Queue == durable.QueueCompensate, Start: ms.began}
}

// traceMessage opens the span of the message being handled, now that its
// saga st is read, and returns the context carrying it. A saga without a
// trace context (started untraced) takes this span's, and keeps it with
// its next write. Without a Tracer, or with st nil (its read failed), it
// returns ctx.
func (c *Coordinator) traceMessage(ctx context.Context, st *saga.State) context.Context {
	if c.cfg.Tracer == nil || st == nil {
		return ctx
	}
	ms, _ := ctx.Value(messageSpanKey{}).(*messageSpan)
	if ms == nil || ms.msg.SagaID != st.SagaID {
		return ctx
	}
	if ms.span == nil {
		ms.name, ms.version, ms.status = st.Name, st.Version, st.Status
		ms.ctx, ms.span = c.cfg.Tracer.StartSpan(ctx, st.Trace, c.messageParams(ms))
	}
	if st.Trace.IsZero() {
		st.Trace = ms.span.TraceContext()
	}
	return ms.ctx
}

// noteHandled tells the message span where the saga stands after it.
func (c *Coordinator) noteHandled(ctx context.Context, st *saga.State) {
	if c.cfg.Tracer == nil {
		return
	}
	if ms, _ := ctx.Value(messageSpanKey{}).(*messageSpan); ms != nil && ms.msg.SagaID == st.SagaID {
		ms.version, ms.status = st.Version, st.Status
	}
}

// traceCall opens the span of an action call inside ctx's (the message's).
func (c *Coordinator) traceCall(ctx context.Context, st *saga.State, call *saga.Call) (context.Context, Span) {
	return c.cfg.Tracer.StartSpan(ctx, saga.TraceContext{}, SpanParams{Kind: SpanAction, SagaID: call.SagaID, SagaName: st.Name,
		Step: call.Step, Attempt: call.Attempt, Version: st.Version, Action: call.Action, Compensation: call.Compensation, Start: c.cfg.Clock.Now()})
}

// endCall closes an action call's span.
func (c *Coordinator) endCall(sp Span, st *saga.State, err error) {
	outcome := CallSucceeded
	if err != nil {
		outcome = CallFailed
	}
	sp.End(SpanEnd{Outcome: outcome, Version: st.Version, Status: st.Status, Err: err, End: c.cfg.Clock.Now()})
}
