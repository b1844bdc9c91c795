package schedule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// ScheduledTime is the context attribute that EventBridge Scheduler
// replaces, wherever it appears in a target's Input, with the time the
// firing was due.
const ScheduledTime = "<aws.scheduler.scheduled-time>"

// TimeLayout is how EventBridge Scheduler writes the scheduled time:
// ISO 8601 in UTC, to the second, 2022-03-22T18:59:43Z.
const TimeLayout = "2006-01-02T15:04:05Z"

// MaxIDPrefixLen is the longest id prefix: a saga id holds at most 128
// bytes (durable.ValidSagaID), and the scheduled time takes 20 of them.
const MaxIDPrefixLen = 128 - len(TimeLayout)

// CheckIDPrefix reports why prefix cannot begin the saga ids of a
// schedule, or nil: it is 1 to MaxIDPrefixLen letters, digits, '_', '.',
// ':' or '-', starting with a letter or digit. It may not be empty: saga
// ids are unique across a deployment, and a prefix of its own keeps one
// schedule's sagas apart from another's that fires at the same time.
func CheckIDPrefix(prefix string) error {
	switch {
	case prefix == "":
		return fmt.Errorf("empty: give each schedule a prefix of its own (such as the saga's name and '-')")
	case len(prefix) > MaxIDPrefixLen:
		return fmt.Errorf("%d bytes, over %d: the id with its time (20 bytes) would be over 128", len(prefix), MaxIDPrefixLen)
	case !durable.ValidSagaID(prefix):
		return fmt.Errorf("not the start of a saga id: use letters, digits, '_', '.', ':' or '-', starting with a letter or digit")
	}
	return nil
}

// SagaID returns the id of the saga a schedule starts for its firing
// due at scheduled: exactly what EventBridge Scheduler makes of
// prefix + ScheduledTime in the Input that Request renders. Every
// delivery of one firing carries the same id.
func SagaID(prefix string, scheduled time.Time) (string, error) {
	if err := CheckIDPrefix(prefix); err != nil {
		return "", fmt.Errorf("id prefix %q: %w", prefix, err)
	}
	id := prefix + scheduled.UTC().Format(TimeLayout)
	if !durable.ValidSagaID(id) { // a year past 9999 or before 0
		return "", fmt.Errorf("scheduled time %s: the id %q is not a saga id", scheduled.UTC().Format(time.RFC3339), id)
	}
	return id, nil
}

// Request renders the Input of a schedule's target: the start queue's
// start request (docs/START_QUEUE.md), {"start": {"saga": saga, "id":
// idPrefix + ScheduledTime, "input": input}}, compact JSON. saga names a
// deployed definition; input is a JSON object, {} when empty.
func Request(saga, idPrefix string, input json.RawMessage) (string, error) {
	if !lang.ValidSagaName(saga) {
		return "", fmt.Errorf("saga name %q: %s", saga, lang.SagaNameRule)
	}
	if err := CheckIDPrefix(idPrefix); err != nil {
		return "", fmt.Errorf("id prefix %q: %w", idPrefix, err)
	}
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(input, &obj); err != nil || obj == nil {
		return "", fmt.Errorf("input: not a JSON object")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, input); err != nil {
		return "", fmt.Errorf("input: %w", err)
	}
	req := struct {
		Start struct {
			Saga  string          `json:"saga"`
			ID    string          `json:"id"`
			Input json.RawMessage `json:"input"`
		} `json:"start"`
	}{}
	req.Start.Saga, req.Start.ID, req.Start.Input = saga, idPrefix+ScheduledTime, compact.Bytes()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the placeholder's < and > must stay as they are for Scheduler to find it
	if err := enc.Encode(req); err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
}
