// Package otelsaga traces sagas with OpenTelemetry: Tracer is the
// engine.Tracer that turns a coordinator's spans (a saga's start, each
// message handled, each action or compensation called) into OpenTelemetry
// spans, all the spans of one saga in one trace, and LogHandler adds the
// trace_id and span_id of the span in a log call's context to its line.
//
// It uses only the OpenTelemetry API: the program chooses the SDK, the
// exporter and the ids (the Lambda functions export OTLP to the ADOT
// collector layer, with X-Ray's ids; internal/sqshandler and
// docs/DEPLOY.md, "Traces").
package otelsaga
