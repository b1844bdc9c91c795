package engine

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// MaxInputBytes bounds a saga's input, measured as JSON.
const MaxInputBytes = 128 << 10

// CheckInput checks a saga input against the declared input types and
// returns it converted to them: JSON numbers become int64, uint64 or
// float64 as declared, RFC 3339 strings timestamps, "90s" strings durations,
// base64 strings bytes. A definition without input declarations takes any
// JSON object. Every problem is reported, each naming its field.
func (p *Plan) CheckInput(input map[string]any) (map[string]any, error) {
	if input == nil {
		input = map[string]any{}
	}
	out := make(map[string]any, len(input))
	var problems []string
	if p.def.Input == nil {
		for k, v := range input {
			c, err := CheckValue(normalizeJSON(v))
			if err != nil {
				problems = append(problems, fmt.Sprintf("input.%s: %v", k, err))
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
			c, err := convertInput(f.Type, normalizeJSON(v))
			if err != nil {
				problems = append(problems, fmt.Sprintf("input.%s: %v", f.Name, err))
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
	if len(problems) == 0 {
		if b, err := json.Marshal(input); err == nil && len(b) > MaxInputBytes {
			problems = append(problems, fmt.Sprintf("input is %d bytes as JSON, over the limit of %d", len(b), MaxInputBytes))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, fmt.Errorf("%w: %s", ErrInvalidInput, strings.Join(problems, "; "))
	}
	return out, nil
}

// normalizeJSON turns json.Number (from a decoder with UseNumber) into
// int64 when the text is whole and float64 otherwise, recursively.
func normalizeJSON(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		if f, err := t.Float64(); err == nil {
			return f
		}
		return t.String()
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normalizeJSON(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = normalizeJSON(e)
		}
		return out
	}
	return v
}

// NormalizeJSON converts values decoded from JSON (with or without
// UseNumber) into the plain values state holds.
func NormalizeJSON(v any) (any, error) { return CheckValue(normalizeJSON(v)) }

func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 40 {
		return fmt.Sprintf("a %T", v)
	}
	return fmt.Sprintf("%T %s", v, b)
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
		case float64:
			if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
				return int64(n), nil
			}
		}
	case "uint":
		switch n := v.(type) {
		case int64:
			if n >= 0 {
				return uint64(n), nil
			}
		case uint64:
			return n, nil
		case float64:
			if n >= 0 && n == math.Trunc(n) && n < 1<<53 {
				return uint64(n), nil
			}
		}
	case "double":
		switch n := v.(type) {
		case float64:
			return CheckValue(n)
		case int64:
			return float64(n), nil
		case int:
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
			return t, nil
		case string:
			ts, err := time.Parse(time.RFC3339Nano, t)
			if err != nil {
				return nil, fmt.Errorf("want an RFC 3339 timestamp, got %q", t)
			}
			return ts, nil
		}
	case "duration":
		switch t := v.(type) {
		case time.Duration:
			return t, nil
		case string:
			d, err := time.ParseDuration(t)
			if err != nil {
				return nil, fmt.Errorf("want a duration such as 90s, got %q", t)
			}
			return d, nil
		}
	}
	return nil, bad()
}
