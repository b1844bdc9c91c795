package sqshandler

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// EnvTracing switches the functions' traces on: "otlp" exports them by
// OTLP over HTTP (OTEL_EXPORTER_OTLP_ENDPOINT, by default
// http://localhost:4318, where the ADOT collector layer listens, which
// sends them on to X-Ray); empty or "off", no traces, at no cost. The
// usual OTEL_* variables (OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME, ...)
// apply. docs/DEPLOY.md, "Traces".
const EnvTracing = "LAMBDASAGA_TRACING"

// SpanFlusher exports the spans a batch ended before the handler returns:
// Lambda freezes the function between invocations, so spans still held
// would wait for the next one, or be lost.
// *sdktrace.TracerProvider is one.
type SpanFlusher interface {
	ForceFlush(ctx context.Context) error
}

// tracingFromEnvironment returns the tracer provider EnvTracing asks for;
// nil when tracing is off.
func tracingFromEnvironment(ctx context.Context) (*sdktrace.TracerProvider, error) {
	switch v := os.Getenv(EnvTracing); v {
	case "", "off":
		return nil, nil
	case "otlp":
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("environment: %s=otlp: %w", EnvTracing, err)
		}
		return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithIDGenerator(XRayIDs{})), nil
	default:
		return nil, fmt.Errorf("environment: %s=%q: use otlp, or off", EnvTracing, v)
	}
}

// XRayIDs makes trace ids X-Ray's way, as the ADOT X-Ray id generator
// does: the first 4 bytes are the trace's start in Unix seconds, the other
// 12 random; span ids are 8 random bytes. The X-Ray API reference
// (PutTraceSegments, "Trace ID Format") says X-Ray no longer validates
// that time for OpenTelemetry ids; the ids keep it so that tools
// that read it (and older collectors) see a trace's start.
type XRayIDs struct{}

var _ sdktrace.IDGenerator = XRayIDs{}

// NewIDs returns a new trace id and the id of its first span.
func (XRayIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	binary.BigEndian.PutUint32(tid[:4], uint32(time.Now().Unix()))
	_, _ = rand.Read(tid[4:])
	return tid, newSpanID()
}

// NewSpanID returns a new span id.
func (XRayIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for sid == (trace.SpanID{}) { // all zero is invalid
		_, _ = rand.Read(sid[:])
	}
	return sid
}
