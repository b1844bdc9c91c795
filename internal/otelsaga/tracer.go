package otelsaga

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// ScopeName names the instrumentation scope of the spans.
const ScopeName = "github.com/lambdasaga/lambdasaga"

// The attributes of the spans. A span carries those its kind knows.
const (
	AttrSagaID       = attribute.Key("saga.id")
	AttrSagaName     = attribute.Key("saga.name")
	AttrStep         = attribute.Key("saga.step")
	AttrAttempt      = attribute.Key("saga.attempt")
	AttrVersion      = attribute.Key("saga.version") // the version the message names; at the end, the version after
	AttrOutcome      = attribute.Key("saga.outcome")
	AttrStatus       = attribute.Key("saga.status")
	AttrAction       = attribute.Key("saga.action")
	AttrCompensation = attribute.Key("saga.compensation")
	AttrMessage      = attribute.Key("saga.message") // a fork's message kind: ended, join, undo, stop
	AttrErrorType    = attribute.Key("saga.error_type")
)

// Tracer is an engine.Tracer on an OpenTelemetry TracerProvider. It is
// safe for concurrent use.
type Tracer struct {
	tracer trace.Tracer
}

var _ engine.Tracer = (*Tracer)(nil)

// New returns a Tracer on tp; nil: the global provider (otel.GetTracerProvider).
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Tracer{tracer: tp.Tracer(ScopeName)}
}

// StartSpan opens the span p describes, as engine.Tracer says. A span
// whose parent is a saga's while ctx carries another span (the Lambda
// invocation's, say) is linked to that one.
func (t *Tracer) StartSpan(ctx context.Context, parent saga.TraceContext, p engine.SpanParams) (context.Context, engine.Span) {
	opts := make([]trace.SpanStartOption, 0, 4)
	if !parent.IsZero() {
		if here := trace.SpanContextFromContext(ctx); here.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: here}))
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, SpanContext(parent))
	}
	if !p.Start.IsZero() {
		opts = append(opts, trace.WithTimestamp(p.Start))
	}
	attrs := []attribute.KeyValue{AttrSagaID.String(p.SagaID), AttrSagaName.String(p.SagaName), AttrVersion.Int64(int64(p.Version))}
	kind := trace.SpanKindInternal
	var name strings.Builder
	name.WriteString(p.SagaName)
	switch p.Kind {
	case engine.SpanSaga:
		name.WriteString(" start")
		kind = trace.SpanKindProducer
	case engine.SpanMessage:
		kind = trace.SpanKindConsumer
		attrs = append(attrs, AttrStep.String(p.Step), AttrAttempt.Int(p.Attempt), AttrCompensation.Bool(p.Compensation))
		switch {
		case p.Message != "":
			attrs = append(attrs, AttrMessage.String(string(p.Message)))
			name.WriteString(" " + string(p.Message))
		case p.Compensation:
			name.WriteString(" compensate")
		}
		name.WriteString(" " + p.Step)
	case engine.SpanAction:
		attrs = append(attrs, AttrStep.String(p.Step), AttrAttempt.Int(p.Attempt), AttrAction.String(p.Action), AttrCompensation.Bool(p.Compensation))
		name.Reset()
		name.WriteString(p.Action)
	}
	opts = append(opts, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	ctx, s := t.tracer.Start(ctx, name.String(), opts...)
	return ctx, span{s}
}

// span is an engine.Span on an OpenTelemetry span.
type span struct{ s trace.Span }

func (s span) TraceContext() saga.TraceContext { return TraceContext(s.s.SpanContext()) }

func (s span) End(e engine.SpanEnd) {
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, AttrOutcome.String(e.Outcome))
	if e.Version > 0 {
		attrs = append(attrs, AttrVersion.Int64(int64(e.Version)))
	}
	if e.Status != "" {
		attrs = append(attrs, AttrStatus.String(string(e.Status)))
	}
	if e.Err != nil {
		attrs = append(attrs, AttrErrorType.String(saga.ErrorType(e.Err)))
		s.s.RecordError(e.Err)
		s.s.SetStatus(codes.Error, e.Err.Error())
	}
	s.s.SetAttributes(attrs...)
	if e.End.IsZero() {
		s.s.End()
		return
	}
	s.s.End(trace.WithTimestamp(e.End))
}

// TraceContext is sc's identifiers as a saga keeps them; zero if sc is
// invalid.
func TraceContext(sc trace.SpanContext) saga.TraceContext {
	if !sc.IsValid() {
		return saga.TraceContext{}
	}
	return saga.TraceContext{TraceID: sc.TraceID(), SpanID: sc.SpanID(), Flags: byte(sc.TraceFlags())}
}

// SpanContext is the remote span context tc names.
func SpanContext(tc saga.TraceContext) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tc.TraceID, SpanID: tc.SpanID, TraceFlags: trace.TraceFlags(tc.Flags), Remote: true})
}
