package saga

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxInputBytes bounds a saga's input, measured as JSON, when every value
// is kept inline; MaxOffloadInputBytes when large values are kept as
// objects (CheckInputWithin).
const MaxInputBytes = 128 << 10

// MaxOffloadInputBytes bounds a saga's input, measured as JSON, when the
// engine keeps large values as objects: what one object may hold.
const MaxOffloadInputBytes = MaxValueBytes

// CheckInput checks a saga input against the declared input types and
// returns it converted to them: JSON numbers become int64, uint64 or
// float64 as declared, RFC 3339 strings timestamps, "90s" strings durations,
// base64 strings bytes. A definition without input declarations takes any
// JSON object. Every problem is reported, each naming its field and the
// type it got, never the value (inputs carry card numbers and addresses).
//
// Timestamps, wherever they are in the input, come back in UTC, as the
// stored state holds them: the same input given twice converts to equal
// values whatever offset it was written with, so Start stays idempotent.
func (p *Plan) CheckInput(input map[string]any) (map[string]any, error) {
	return p.CheckInputWithin(input, 0)
}

// CheckInputWithin is CheckInput for an engine that keeps values over
// offloadBytes as objects (Event.OffloadBytes): when it is positive, the
// input may be MaxOffloadInputBytes as JSON; what stays inline is bounded
// by the state's limit.
func (p *Plan) CheckInputWithin(input map[string]any, offloadBytes int) (map[string]any, error) {
	maxBytes := MaxInputBytes
	if offloadBytes > 0 {
		maxBytes = MaxOffloadInputBytes
	}
	if input == nil {
		input = map[string]any{}
	}
	out := make(map[string]any, len(input))
	var problems []string
	if p.def.Input == nil {
		for k, v := range input {
			c, err := normalizeJSON(v)
			if err == nil {
				c, err = CheckValue(c)
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("input.%s%v", k, pathError(err)))
				continue
			}
			out[k] = c
		}
	} else {
		declared := map[string]bool{}
		for _, f := range p.def.Input {
			declared[f.Name] = true
			v, ok := input[f.Name]
			if !ok {
				problems = append(problems, fmt.Sprintf("input.%s: missing (declared %s)", f.Name, f.Type))
				continue
			}
			c, err := normalizeJSON(v)
			if err == nil {
				c, err = convertInput(f.Type, c)
			} else if ve, ok := err.(*valueError); ok && ve.path == "" && ve.err == errNumberRange && isNumberType(f.Type) {
				err = numberRangeError(f.Type)
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("input.%s%v", f.Name, pathError(err)))
				continue
			}
			out[f.Name] = c
		}
		for k := range input {
			if !declared[k] {
				problems = append(problems, fmt.Sprintf("input.%s: not declared by saga %s", k, p.def.Name))
			}
		}
	}
	if len(problems) == 0 && offloadBytes > 0 {
		// Secret fields stay inline (masked where values print, never
		// put as objects): together they keep the inline input's limit,
		// or the saga would be created and fail at once, its state too
		// large to write.
		secret := map[string]any{}
		for _, f := range p.def.Input {
			if f.Secret {
				secret[f.Name] = out[f.Name]
			}
		}
		if n, err := jsonSize(secret); err == nil && len(secret) > 0 && n > MaxInputBytes {
			problems = append(problems, fmt.Sprintf("input: the secret fields are %d bytes as JSON, over the limit of %d: secret fields stay inline, never kept as objects", n, MaxInputBytes))
		}
	}
	if len(problems) == 0 {
		switch n, err := jsonSize(input); {
		case err != nil:
			problems = append(problems, fmt.Sprintf("input cannot be written as JSON, so its size cannot be checked (%v)", err))
		case n > maxBytes:
			problems = append(problems, fmt.Sprintf("input is %d bytes as JSON, over the limit of %d", n, maxBytes))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, fmt.Errorf("%w: %s", ErrInvalidInput, strings.Join(problems, "; "))
	}
	return out, nil
}

// errNumberRange is a JSON number no Go number type holds.
var errNumberRange = errors.New("number out of range")

func isNumberType(typ string) bool { return typ == "int" || typ == "uint" || typ == "double" }

func numberRangeError(typ string) error { return fmt.Errorf("number out of range for %s", typ) }

// valueError is a problem at path inside a value: "", "[2]", ".x[0]".
type valueError struct {
	path string
	err  error
}

func (e *valueError) Error() string {
	if e.path == "" {
		return e.err.Error()
	}
	return strings.TrimPrefix(e.path, ".") + ": " + e.err.Error()
}

func (e *valueError) Unwrap() error { return e.err }

// pathError formats err to follow a field name: "[2][0]: why" or
// ".x: why" for a problem inside the field's value, ": why" for the field.
func pathError(err error) string {
	if ve, ok := err.(*valueError); ok && ve.path != "" {
		return ve.path + ": " + ve.err.Error()
	}
	return ": " + err.Error()
}

// jsonSize is the size of v as compact JSON, as a user would write it:
// without Go's HTML escaping, which turns each of <, > and & into six bytes.
func jsonSize(v any) (int, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return 0, err
	}
	return b.Len() - 1, nil // Encode ends with a newline
}

// normalizeJSON turns json.Number (from a decoder with UseNumber) into
// int64 when the text is a whole number that fits, uint64 when it is whole,
// positive and fits only that, and float64 otherwise; a number beyond a
// float64 is errNumberRange. Timestamps become UTC (and lose any monotonic
// clock reading), and nil lists, maps and bytes empty ones, as the stored
// state decodes them. Lists and maps are copied, recursively.
func normalizeJSON(v any) (any, error) {
	switch t := v.(type) {
	case json.Number:
		s := t.String()
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return u, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if errors.Is(err, strconv.ErrRange) {
			return nil, &valueError{err: errNumberRange}
		}
		if err != nil {
			return nil, &valueError{err: errors.New("a json.Number that is not a number")}
		}
		return f, nil
	case time.Time:
		return t.UTC(), nil
	case []byte:
		if t == nil {
			return []byte{}, nil
		}
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			c, err := normalizeJSON(e)
			if err != nil {
				return nil, inside(fmt.Sprintf("[%d]", i), err)
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			c, err := normalizeJSON(e)
			if err != nil {
				return nil, inside("."+k, err)
			}
			out[k] = c
		}
		return out, nil
	}
	return v, nil
}

func inside(step string, err error) error {
	if ve, ok := err.(*valueError); ok {
		return &valueError{path: step + ve.path, err: ve.err}
	}
	return &valueError{path: step, err: err}
}

// NormalizeJSON converts values decoded from JSON (with or without
// UseNumber) into the plain values state holds. A number beyond a float64
// is an error naming where it is, never its text.
func NormalizeJSON(v any) (any, error) {
	n, err := normalizeJSON(v)
	if err != nil {
		return nil, err
	}
	return CheckValue(n)
}

// describe names v's type in the definition language's words ("a string",
// "an int", "a map"), never its value.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case int, int8, int16, int32, int64:
		return "an int"
	case uint, uint8, uint16, uint32, uint64:
		return "a uint"
	case float32, float64:
		return "a double"
	case []byte:
		return "bytes"
	case time.Time:
		return "a timestamp"
	case time.Duration:
		return "a duration"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	default:
		return "a value of none of the language's types"
	}
}

func convertInput(typ string, v any) (any, error) {
	bad := func() error { return fmt.Errorf("want %s, got %s", typ, describe(v)) }
	switch typ {
	case "any":
		return CheckValue(v)
	case "string":
		if s, ok := v.(string); ok {
			return s, nil
		}
	case "bool":
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case "int":
		switch n := v.(type) {
		case int64:
			return n, nil
		case int:
			return int64(n), nil
		case uint64:
			if n > math.MaxInt64 {
				return nil, numberRangeError(typ)
			}
			return int64(n), nil
		case float64:
			switch {
			case n != math.Trunc(n):
				return nil, bad()
			case math.Abs(n) < 1<<53:
				return int64(n), nil
			case n >= 1<<63 || n <= -(1<<63): // -2^63 too: it is also where -2^63-1 rounds to
				return nil, numberRangeError(typ)
			}
			return nil, fmt.Errorf("want int, got a double past 2^53, which may have lost digits (write it without a fraction or exponent)")
		}
	case "uint":
		switch n := v.(type) {
		case int64:
			if n >= 0 {
				return uint64(n), nil
			}
			return nil, fmt.Errorf("want uint, got a negative int")
		case int:
			if n >= 0 {
				return uint64(n), nil
			}
			return nil, fmt.Errorf("want uint, got a negative int")
		case uint64:
			return n, nil
		case float64:
			switch {
			case n != math.Trunc(n):
				return nil, bad()
			case n < 0:
				return nil, fmt.Errorf("want uint, got a negative double")
			case n < 1<<53:
				return uint64(n), nil
			case n >= 1<<64:
				return nil, numberRangeError(typ)
			}
			return nil, fmt.Errorf("want uint, got a double past 2^53, which may have lost digits (write it without a fraction or exponent)")
		}
	case "double":
		switch n := v.(type) {
		case float64:
			return CheckValue(n)
		case int64:
			return float64(n), nil
		case int:
			return float64(n), nil
		case uint64:
			return float64(n), nil
		}
	case "bytes":
		switch b := v.(type) {
		case []byte:
			return b, nil
		case string:
			d, err := base64.StdEncoding.DecodeString(b)
			if err != nil {
				return nil, fmt.Errorf("want base64 text for bytes: %v", err)
			}
			return d, nil
		}
	case "list":
		if l, ok := v.([]any); ok {
			return CheckValue(l)
		}
	case "map":
		if m, ok := v.(map[string]any); ok {
			return CheckValue(m)
		}
	case "timestamp":
		switch t := v.(type) {
		case time.Time:
			return t, nil // UTC already: normalizeJSON
		case string:
			ts, err := time.Parse(time.RFC3339Nano, t)
			if err != nil {
				return nil, fmt.Errorf("want an RFC 3339 timestamp, got a string")
			}
			return ts.UTC(), nil
		}
	case "duration":
		switch t := v.(type) {
		case time.Duration:
			return t, nil
		case string:
			d, err := time.ParseDuration(t)
			if err != nil {
				return nil, fmt.Errorf("want a duration such as 90s, got a string")
			}
			return d, nil
		}
	}
	return nil, bad()
}
