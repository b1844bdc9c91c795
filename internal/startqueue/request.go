package startqueue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// MaxRequestBytes is the largest request body read: SQS's own limit on a
// message (1 MiB). Each value in it has its own, smaller limit, which the
// engine checks (an input, a signal's payload, a callback's output).
const MaxRequestBytes = 1 << 20

// Request is one message of the start queue: a start, a signal, a
// signal with a start beside it (the saga is started if it does not exist,
// and gets the signal either way), or a callback's completion.
type Request struct {
	Start    *Start    `json:"start,omitempty"`
	Signal   *Signal   `json:"signal,omitempty"`
	Callback *Callback `json:"callback,omitempty"`
}

// Start starts the current version of a deployed saga.
type Start struct {
	// Saga is the name of a deployed definition (sagactl deploy): the
	// saga runs its current version, and keeps it to its end.
	Saga string `json:"saga"`
	// ID names the saga. It is required: the queue delivers at least
	// once, and the id is what makes a second delivery (or a sender's
	// retry) start the saga once.
	ID string `json:"id"`
	// Input is a JSON object checked against the definition's input;
	// absent, an empty object.
	Input json.RawMessage `json:"input,omitempty"`
}

// Signal sends a signal to a saga.
type Signal struct {
	// ID is the saga's id; beside a start, it may be left out (the
	// start's id).
	ID   string `json:"id,omitempty"`
	Name string `json:"name"` // the signal's name, as the saga's await names it
	// Payload is any JSON value; absent, null.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Delivery makes the signal idempotent: a second signal with the same
	// delivery id is a duplicate. Absent, the SQS message id, which every
	// delivery of one message carries (but a sender that sends again
	// makes a new message: give a delivery id to be safe against that).
	Delivery string `json:"delivery,omitempty"`
}

// Callback completes (Output) or fails (Error) a callback token.
type Callback struct {
	Token  string          `json:"token"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  *CallbackError  `json:"error,omitempty"`
}

// CallbackError fails a callback's attempt: the step retries or fails as
// an action's error of that type would make it.
type CallbackError struct {
	Type    string `json:"type"`
	Message string `json:"message,omitempty"`
}

// Kind names what a request asks: "start", "signal", "signal-with-start"
// or "callback".
func (r *Request) Kind() string {
	switch {
	case r.Start != nil && r.Signal != nil:
		return "signal-with-start"
	case r.Start != nil:
		return "start"
	case r.Signal != nil:
		return "signal"
	default:
		return "callback"
	}
}

// SagaID is the id of the saga a request is for; empty for a callback
// (its token names the saga).
func (r *Request) SagaID() string {
	switch {
	case r.Start != nil:
		return r.Start.ID
	case r.Signal != nil:
		return r.Signal.ID
	}
	return ""
}

// ErrMalformed is a request that can never be taken as it is: not JSON,
// not one of the request kinds, a field missing or invalid. A
// *RequestError names the field.
var ErrMalformed = errors.New("malformed start queue request")

// RequestError is a malformed request: the field (a JSON path such as
// "start.id") and what is wrong with it. It never quotes a value of the
// request, which may hold secrets; ids and names it may.
type RequestError struct {
	Field   string // empty: the request as a whole
	Problem string
}

func (e *RequestError) Error() string {
	if e.Field == "" {
		return "request: " + e.Problem
	}
	return "request: " + e.Field + ": " + e.Problem
}

// Unwrap makes every RequestError an ErrMalformed.
func (e *RequestError) Unwrap() error { return ErrMalformed }

func bad(field, format string, args ...any) error {
	return &RequestError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Parse reads one request and checks its shape: exactly one kind, each
// required field present and well formed, no unknown field (a misspelt
// field would otherwise be dropped in silence). What only the saga can
// tell (the input against the definition, the signal's payload size) is
// checked when the request is carried out.
func Parse(body []byte) (*Request, error) {
	if len(body) > MaxRequestBytes {
		return nil, bad("", "%d bytes, over the limit of %d", len(body), MaxRequestBytes)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, bad("", "empty body: send one JSON object with \"start\", \"signal\" or \"callback\"")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var top json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return nil, decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("", "more than one JSON value: send one request per message")
	}
	// encoding/json matches field names without regard to case, and keeps
	// the last of repeated ones: the keys are checked exactly first, so
	// that what this reads is what the schema accepts.
	if err := exactKeys(top, "", fields); err != nil {
		return nil, err
	}
	var r Request
	if err := json.Unmarshal(top, &r); err != nil {
		return nil, decodeError(err)
	}
	if err := r.check(); err != nil {
		return nil, err
	}
	return &r, nil
}

// fields are the keys of each object of a request, by its path.
var fields = map[string][]string{
	"":               {"start", "signal", "callback"},
	"start":          {"saga", "id", "input"},
	"signal":         {"id", "name", "payload", "delivery"},
	"callback":       {"token", "output", "error"},
	"callback.error": {"type", "message"},
}

// exactKeys checks that the object at path (and the objects of the
// request below it) has only its own keys, spelt exactly, each once.
func exactKeys(raw json.RawMessage, path string, fields map[string][]string) error {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || b[0] != '{' {
		return nil // not an object: the typed decode says so
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return decodeError(err)
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return decodeError(err)
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return decodeError(err)
		}
		field := pathKey(key)
		if path != "" {
			field = path + "." + field
		}
		if !slices.Contains(fields[path], key) {
			where := "the request"
			if path != "" {
				where = path
			}
			return bad(field, "unknown field (%s has %s; see docs/START_QUEUE.md)", where, strings.Join(fields[path], ", "))
		}
		if seen[key] {
			return bad(field, "given twice")
		}
		seen[key] = true
		if _, ok := fields[field]; ok {
			if err := exactKeys(v, field, fields); err != nil {
				return err
			}
		} else if err := uniqueKeys(v, field); err != nil {
			return err
		}
	}
	return nil
}

// uniqueKeys checks that no object in the value raw (an input, a payload,
// an output, at field) repeats a key: encoding/json, and every other
// parser a sender may test with, keeps the last of them, so
// {"amount": 1, "amount": 1000} would run with a value its sender may not
// have meant. It walks the tokens with a stack, not by recursion: a value
// may nest as deep as the decoder allows.
func uniqueKeys(raw json.RawMessage, field string) error {
	type frame struct {
		path  string          // the object's or array's own
		keys  map[string]bool // nil: an array
		value string          // an object's: the path of its last key's value
		index int             // an array's: its next element
		key   bool            // an object's: the next token is a key or its end
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // a number past a float64 is the engine's to refuse
	for {
		t, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return decodeError(err)
		}
		path := field
		if n := len(stack); n > 0 {
			top := stack[n-1]
			switch {
			case t == json.Delim('}') || t == json.Delim(']'):
				stack = stack[:n-1]
				continue
			case top.keys != nil && top.key:
				k, _ := t.(string)
				top.value = top.path + "." + pathKey(k)
				if top.keys[k] {
					return bad(top.value, "given twice")
				}
				top.keys[k], top.key = true, false
				continue
			case top.keys != nil:
				path, top.key = top.value, true
			default:
				path = fmt.Sprintf("%s[%d]", top.path, top.index)
				top.index++
			}
		}
		switch t {
		case json.Delim('{'):
			stack = append(stack, &frame{path: path, keys: map[string]bool{}, key: true})
		case json.Delim('['):
			stack = append(stack, &frame{path: path})
		}
	}
}

// decodeError says where a body failed to decode, without its text.
func decodeError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntax):
		return bad("", "not valid JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return bad("", "must be a JSON object with \"start\", \"signal\" or \"callback\", got %s", typ.Value)
		}
		return bad(typ.Field, "must be %s, got %s", jsonType(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return bad("", "not valid JSON (it ends too soon)")
	}
	return bad("", "not valid JSON")
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "ptr", "struct":
		return "an object"
	}
	return kind
}

func (r *Request) check() error {
	switch {
	case r.Start == nil && r.Signal == nil && r.Callback == nil:
		return bad("", "empty request: give \"start\", \"signal\" or \"callback\"")
	case r.Callback != nil && (r.Start != nil || r.Signal != nil):
		return bad("callback", "goes alone: a callback's token names its saga (a start or a signal goes in a request of its own)")
	}
	if s := r.Start; s != nil {
		if err := checkStart(s); err != nil {
			return err
		}
	}
	if s := r.Signal; s != nil {
		if r.Start != nil {
			switch {
			case s.ID == "":
				s.ID = r.Start.ID
			case s.ID != r.Start.ID:
				return bad("signal.id", "%s is not the start's id %s: a signal with a start goes to the saga it starts (leave signal.id out)", quote(s.ID), quote(r.Start.ID))
			}
		}
		if err := checkSignal(s); err != nil {
			return err
		}
	}
	if c := r.Callback; c != nil {
		if err := checkCallback(c); err != nil {
			return err
		}
	}
	return nil
}

func checkStart(s *Start) error {
	switch {
	case s.Saga == "":
		return bad("start.saga", "missing: the name of a deployed saga (sagactl deploy)")
	case !lang.ValidSagaName(s.Saga):
		return bad("start.saga", "%s is not a saga name (%s)", quote(s.Saga), lang.SagaNameRule)
	}
	if err := checkID("start.id", s.ID); err != nil {
		return err
	}
	if durable.IsChildID(s.ID) {
		return bad("start.id", "%s has the form of a child run's id (<parent>.<step>.<visit>.<index>): forks name their children so; choose another", quote(s.ID))
	}
	if len(s.Input) > 0 && !isObject(s.Input) {
		return bad("start.input", "must be a JSON object")
	}
	return nil
}

func checkSignal(s *Signal) error {
	if err := checkID("signal.id", s.ID); err != nil {
		return err
	}
	switch {
	case s.Name == "":
		return bad("signal.name", "missing: the name the saga's await waits for")
	case !lang.SignalNamePattern.MatchString(s.Name):
		return bad("signal.name", "%s is not a signal name (%s)", quote(s.Name), lang.SignalNameRule)
	case s.Delivery != "" && !saga.ValidDeliveryID(s.Delivery):
		return bad("signal.delivery", "%s is not a delivery id (%s)", quote(s.Delivery), saga.DeliveryIDRule)
	}
	return nil
}

func checkCallback(c *Callback) error {
	switch {
	case c.Token == "":
		return bad("callback.token", "missing: the token the saga's callback step gave its action")
	case c.Error != nil && len(c.Output) > 0:
		return bad("callback", "give \"output\" (the step succeeded) or \"error\" (it failed), not both")
	case c.Error != nil && c.Error.Type == "":
		return bad("callback.error.type", "missing: the error's type, which the step's retry.permanent and catch match")
	case c.Error != nil && utf8.RuneCountInString(c.Error.Message) > 4096:
		return bad("callback.error.message", "over the limit of 4096 characters")
	}
	return nil
}

func checkID(field, id string) error {
	switch {
	case id == "":
		return bad(field, "missing: the saga's id")
	case !durable.ValidSagaID(id):
		return bad(field, "%s is not a saga id (1 to 128 letters, digits, '_', '.', ':' and '-', starting with a letter or digit)", quote(id))
	}
	return nil
}

func isObject(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{'
}

// maxQuoted bounds what a reason quotes of an id or a name that is not
// one: enough to recognise it, not a megabyte of logs.
const maxQuoted = 100

// quote is s quoted (control characters escaped), its first maxQuoted
// bytes and its length when it is longer.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:n]), len(s))
}

// pathKey is a key as a field path names it: as it is when it is a plain
// word, quoted (quote) when not.
func pathKey(k string) string {
	if k != "" && len(k) <= maxQuoted && !strings.ContainsFunc(k, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		return k
	}
	return quote(k)
}
