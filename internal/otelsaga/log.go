package otelsaga

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler wraps h so that a line logged with a context that carries a
// valid span has the attributes trace_id and span_id (W3C hex; X-Ray
// writes the same trace id as 1-<first 8 digits>-<other 24>). A line
// without one is passed on as it is.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ inner slog.Handler }

func (h logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.inner.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.inner.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.inner.WithGroup(name)} }
