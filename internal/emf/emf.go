// Package emf writes the functions' metrics as CloudWatch embedded metric
// format (EMF) lines: JSON documents on standard output that CloudWatch
// Logs turns into metrics in the namespace lambdasaga, with no API call on
// the hot path (AWS docs, CloudWatch User Guide, "Specification: Embedded
// metric format").
//
// A Recorder collects what the handlers of a batch did (the coordinator's
// step events through OnStep, the records handled, failed, handed back or
// malformed, the conditional writes that lost) and Flush writes them once
// the batch is done. An EMF document takes its dimension values from
// members of its root, so one line carries one combination of them: a
// flush writes a line for the function, one per saga name and one per step
// (of a saga) the batch touched. No line names more than 7 metrics, well
// under the specification's 100 per directive, and a step with more than
// 100 durations in one batch gets further lines, since a metric's array
// holds at most 100 values.
package emf

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// Namespace is the CloudWatch namespace of every metric lambdasaga emits.
const Namespace = "lambdasaga"

// Unit is a CloudWatch metric unit.
type Unit string

// The units the functions' metrics use.
const (
	Count        Unit = "Count"
	Milliseconds Unit = "Milliseconds"
	None         Unit = "None" // CloudWatch has no currency unit
)

// Dimension names.
const (
	DimFunction = "Function" // the Lambda function's name
	DimSagaName = "SagaName" // the saga definition's name
	// DimStep is the step's id; for its compensation, the id and
	// "/compensate" (a step id holds no '/').
	DimStep = "Step"
)

// The metrics, by name. Those of a function carry the dimension set
// [Function]; those of sagas [SagaName] and [] (no dimension: the total
// over every saga); those of steps [SagaName, Step], [SagaName] and [].
const (
	// Per function, in every batch's line (zeros included).
	RecordsHandled    = "RecordsHandled"    // records done and deleted
	RecordsFailed     = "RecordsFailed"     // records reported failed (partial batch failures): they come back, malformed ones included
	RecordsMalformed  = "RecordsMalformed"  // records that can never be handled: they reach the dead-letter queue after maxReceiveCount receives
	RecordsHandedBack = "RecordsHandedBack" // records sent again for a fresh invocation: the deadline was near
	RequestsRefused   = "RequestsRefused"   // start queue requests refused: moved to its dead-letter queue with the reason (docs/START_QUEUE.md)
	WriteConflicts    = "WriteConflicts"    // conditional writes of a saga that lost to another writer

	// Per saga name, when not zero.
	SagasStarted     = "SagasStarted"     // a function wrote the saga's first transition after its start (version 2)
	SagasSucceeded   = "SagasSucceeded"   // a function's transition ended the saga succeeded
	SagasCompensated = "SagasCompensated" // a function's transition ended the saga compensated
	SagasParked      = "SagasParked"      // a function's transition parked the saga in compensation_failed
	SagasHeld        = "SagasHeld"        // a function's transition held the saga for an operator (on_failure: hold)

	// EstimatedCost is what the function's work cost, in USD (unit None;
	// a double carries a step's millionths of a dollar exactly enough),
	// at internal/cost's list prices, as AWS bills each request: per saga
	// name when not zero, and per function in every batch's line (zero
	// included), which a budget alarm sums. Only with Config.MemoryMB;
	// docs/COST.md, "What it costs, as it runs".
	EstimatedCost = "EstimatedCost"

	// Per step of an action or await (and per compensation), when not zero.
	StepDuration  = "StepDuration"  // how long the action ran (Milliseconds)
	StepCompleted = "StepCompleted" // the step, or its compensation, succeeded
	StepRetried   = "StepRetried"   // its action failed and will run again
	StepFailed    = "StepFailed"    // the step failed for good (the saga compensates), or its compensation did (the saga parks)
	StepCaught    = "StepCaught"    // the step failed and a catch routed the saga on

	// The sweep's, per function, in each sweep's line.
	SweepChecked         = "SweepChecked"         // unfinished sagas idle too long that the sweep looked at
	SweepResent          = "SweepResent"          // of those, the sagas whose messages it sent again
	SagasLeftForOperator = "SagasLeftForOperator" // sagas re-sent too often: left for an operator
)

// MaxMetricsPerDirective and MaxValuesPerMetric are the specification's
// limits on one line.
const (
	MaxMetricsPerDirective = 100
	MaxValuesPerMetric     = 100
)

// Pre-rendered dimension sets.
const (
	functionDims = `[["Function"]]`
	sagaDims     = `[["SagaName"],[]]`
	stepDims     = `[["SagaName","Step"],["SagaName"],[]]`
)

// value is one metric of a line: a count, or an array of values.
type value struct {
	name   string
	unit   Unit
	count  int64
	values []float64 // nil: count, or number
	number float64
	isNum  bool // number, not count
}

// label is one dimension of a line: a member of the root. suffix is
// appended to the value (the compensation's "/compensate").
type label struct{ key, value, suffix string }

// appendLine appends one EMF document and a newline to b.
func appendLine(b []byte, timestamp int64, dims string, labels []label, metrics []value) []byte {
	b = append(b, `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, timestamp, 10)
	b = append(b, `,"CloudWatchMetrics":[{"Namespace":"`+Namespace+`","Dimensions":`...)
	b = append(b, dims...)
	b = append(b, `,"Metrics":[`...)
	for i, m := range metrics {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"Name":`...)
		b = appendString(b, m.name, "")
		b = append(b, `,"Unit":`...)
		b = appendString(b, string(m.unit), "")
		b = append(b, '}')
	}
	b = append(b, "]}]}"...)
	for _, l := range labels {
		b = append(b, ',')
		b = appendString(b, l.key, "")
		b = append(b, ':')
		b = appendString(b, l.value, l.suffix)
	}
	for _, m := range metrics {
		b = append(b, ',')
		b = appendString(b, m.name, "")
		b = append(b, ':')
		if m.isNum {
			b = appendNumber(b, m.number)
			continue
		}
		if m.values == nil {
			b = strconv.AppendInt(b, m.count, 10)
			continue
		}
		b = append(b, '[')
		for i, v := range m.values {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendNumber(b, v)
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

// appendNumber appends v, 0 when not finite (JSON has no NaN).
func appendNumber(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

// appendString appends s+suffix as a JSON string. Invalid UTF-8 becomes
// U+FFFD, so the line stays valid JSON whatever a name holds.
func appendString(b []byte, s, suffix string) []byte {
	b = append(b, '"')
	for _, part := range [2]string{s, suffix} {
		for i := 0; i < len(part); {
			c := part[i]
			if c < utf8.RuneSelf {
				switch {
				case c == '"' || c == '\\':
					b = append(b, '\\', c)
				case c < 0x20:
					b = append(b, `\u00`...)
					b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
				default:
					b = append(b, c)
				}
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(part[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, part[i:i+size]...)
			}
			i += size
		}
	}
	return append(b, '"')
}
