package saga

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ActionOutput makes an action's output plain values, as Event.Output
// must be. An output state cannot hold (not JSON-like, nested too deep)
// is an error that Advance, given it as Event.Err, takes for InvalidOutput:
// the action took effect, so it counts as completed and is compensated,
// and its step fails.
func ActionOutput(action string, out any) (any, error) {
	norm, err := normalizeOutput(out)
	if err != nil {
		return nil, &invalidOutputError{msg: fmt.Sprintf("action %s returned success with an output state cannot hold: %v", action, err)}
	}
	return norm, nil
}

// normalizeOutput makes an action's output plain values, through JSON for
// structs and other Go types.
func normalizeOutput(out any) (any, error) {
	if v, err := CheckValue(out); err == nil {
		return v, nil
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("output is not JSON-like: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return NormalizeJSON(v)
}

// invalidOutputError is the EventResult error of an action that returned
// success with an output state cannot hold: the action took effect, so it
// counts as completed (and is compensated), and its step fails with
// InvalidOutput.
type invalidOutputError struct{ msg string }

func (e *invalidOutputError) Error() string { return e.msg }

func asInvalidOutput(err error) *invalidOutputError {
	if err == nil {
		return nil
	}
	var bad *invalidOutputError
	if errors.As(err, &bad) {
		return bad
	}
	return nil
}
