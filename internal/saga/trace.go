package saga

// TraceContext is the span a saga's spans descend from, kept in its state
// so that every invocation that handles one of its messages adds to one
// trace (docs/DEPLOY.md, "Traces"). It is the W3C trace context's
// identifiers (traceparent), opaque to the core: the engine's Tracer makes
// and reads it. The zero value is none (the saga was started untraced).
type TraceContext struct {
	TraceID [16]byte // the trace's id
	SpanID  [8]byte  // the id of the span the saga's spans are children of
	Flags   byte     // W3C trace flags: bit 0 is "sampled"
}

// IsZero reports whether tc holds no trace: an all-zero trace id is
// invalid in W3C trace context.
func (tc TraceContext) IsZero() bool { return tc.TraceID == [16]byte{} }

// traceContextBytes is the encoded size of a TraceContext.
const traceContextBytes = 16 + 8 + 1
