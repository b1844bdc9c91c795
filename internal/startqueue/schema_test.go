package startqueue

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaFile is the contract's JSON Schema, as users read it.
const schemaFile = "../../docs/start-request.schema.json"

func loadSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", schemaFile, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(schemaFile, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(schemaFile)
	if err != nil {
		t.Fatalf("%s: %v", schemaFile, err)
	}
	return s
}

// schemaAccepts reports whether the schema accepts body; false for a body
// that is not one JSON value.
func schemaAccepts(s *jsonschema.Schema, body []byte) bool {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return false
	}
	return s.Validate(v) == nil
}

// requestCases are bodies with what Parse must say of them: "" when it
// accepts, else a part of its error (the field it names).
var requestCases = []struct {
	name, body, err string
	// beyondSchema: Parse refuses what JSON Schema cannot state (a key
	// given twice, two fields that must agree); the schema accepts it.
	beyondSchema bool
}{
	{"start", `{"start": {"saga": "order", "id": "o-1", "input": {"order_id": "o-1", "cents": 4250}}}`, "", false},
	{"start without input", `{"start": {"saga": "order", "id": "o-1"}}`, "", false},
	{"start by a scheduled time", `{"start": {"saga": "report", "id": "report-2026-12-02T13:00:00Z", "input": {}}}`, "", false},
	{"signal", `{"signal": {"id": "o-1", "name": "approved", "payload": {"by": "maria"}, "delivery": "d-1"}}`, "", false},
	{"signal without payload", `{"signal": {"id": "o-1", "name": "approved"}}`, "", false},
	{"signal with a scalar payload", `{"signal": {"id": "o-1", "name": "approved", "payload": true}}`, "", false},
	{"signal with start", `{"start": {"saga": "expense", "id": "c-1", "input": {}}, "signal": {"name": "approved", "payload": {}}}`, "", false},
	{"signal with start, same id", `{"start": {"saga": "expense", "id": "c-1"}, "signal": {"id": "c-1", "name": "approved"}}`, "", false},
	{"callback output", `{"callback": {"token": "tok", "output": {"ok": true}}}`, "", false},
	{"callback without output", `{"callback": {"token": "tok"}}`, "", false},
	{"callback error", `{"callback": {"token": "tok", "error": {"type": "Declined", "message": "no"}}}`, "", false},

	{"empty body", ``, "empty body", false},
	{"not JSON", `{"start":`, "not valid JSON", false},
	{"an array", `[1]`, "must be a JSON object", false},
	{"a string", `"start"`, "must be a JSON object", false},
	{"null", `null`, "empty request", false},
	{"empty object", `{}`, "empty request", false},
	{"two values", `{"start": {"saga": "a", "id": "b"}} {}`, "more than one JSON value", false},
	{"unknown kind", `{"stop": {"id": "o-1"}}`, "stop: unknown field", false},
	{"kind in another case", `{"Start": {"saga": "order", "id": "o-1"}}`, "Start: unknown field", false},
	{"field in another case", `{"start": {"Saga": "order", "id": "o-1"}}`, "start.Saga: unknown field", false},
	{"misspelt field", `{"start": {"saga": "order", "id": "o-1", "inputs": {}}}`, "start.inputs: unknown field", false},
	{"repeated kind", `{"start": {"saga": "a", "id": "b"}, "start": {"saga": "a", "id": "c"}}`, "start: given twice", true},
	{"repeated field", `{"start": {"saga": "a", "id": "b", "id": "c"}}`, "start.id: given twice", true},
	{"start without saga", `{"start": {"id": "o-1"}}`, "start.saga: missing", false},
	{"start without id", `{"start": {"saga": "order"}}`, "start.id: missing", false},
	{"start with a bad name", `{"start": {"saga": "9order", "id": "o-1"}}`, "start.saga", false},
	{"start with a bad id", `{"start": {"saga": "order", "id": "o 1"}}`, "start.id", false},
	{"start with a child's id", `{"start": {"saga": "order", "id": "o.pay.1.0"}}`, "child run", false},
	{"start with a child saga's id", `{"start": {"saga": "order", "id": "c0123456789abcdef0123456789abcdef01234567.3"}}`, "child run", false},
	{"start with a dotted id", `{"start": {"saga": "order", "id": "o.pay.1"}}`, "", false},
	{"start with a list input", `{"start": {"saga": "order", "id": "o-1", "input": [1]}}`, "start.input", false},
	{"start with a null input", `{"start": {"saga": "order", "id": "o-1", "input": null}}`, "start.input", false},
	{"start with a numeric id", `{"start": {"saga": "order", "id": 7}}`, "start.id", false},
	{"start not an object", `{"start": "order"}`, "start", false},
	{"signal without id", `{"signal": {"name": "approved"}}`, "signal.id: missing", false},
	{"signal without name", `{"signal": {"id": "o-1"}}`, "signal.name: missing", false},
	{"signal with a bad delivery", `{"signal": {"id": "o-1", "name": "a", "delivery": "d 1"}}`, "signal.delivery", false},
	{"signal with start, other id", `{"start": {"saga": "e", "id": "c-1"}, "signal": {"id": "c-2", "name": "a"}}`, "signal.id", true},
	{"callback with start", `{"start": {"saga": "e", "id": "c-1"}, "callback": {"token": "t"}}`, "callback: goes alone", false},
	{"callback with signal", `{"signal": {"id": "c-1", "name": "a"}, "callback": {"token": "t"}}`, "callback: goes alone", false},
	{"callback without token", `{"callback": {"output": 1}}`, "callback.token: missing", false},
	{"callback with output and error", `{"callback": {"token": "t", "output": 1, "error": {"type": "X"}}}`, "not both", false},
	{"callback error without type", `{"callback": {"token": "t", "error": {"message": "m"}}}`, "callback.error.type: missing", false},
	{"callback error with a stray field", `{"callback": {"token": "t", "error": {"type": "X", "code": 1}}}`, "callback.error.code: unknown field", false},
	{"input repeating a key", `{"start": {"saga": "e", "id": "c-1", "input": {"amount": 1, "amount": 1000}}}`, "start.input.amount: given twice", true},
	{"input repeating a key deep down", `{"start": {"saga": "e", "id": "c-1", "input": {"a": [{"b": {"c": 1, "c": 2}}]}}}`, "start.input.a[0].b.c: given twice", true},
	{"payload repeating a key", `{"signal": {"id": "o-1", "name": "a", "payload": {"ok": false, "ok": true}}}`, "signal.payload.ok: given twice", true},
	{"output repeating a key", `{"callback": {"token": "t", "output": [{"x": 1, "x": 1}]}}`, "callback.output[0].x: given twice", true},
}

func TestParseRequests(t *testing.T) {
	schema := loadSchema(t)
	for _, tc := range requestCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse([]byte(tc.body))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("Parse accepted it: %+v", r)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Fatalf("Parse: %v; want it to say %q", err, tc.err)
			case err != nil && !errors.Is(err, ErrMalformed):
				t.Fatalf("Parse: %v is not ErrMalformed", err)
			}
			if got := schemaAccepts(schema, []byte(tc.body)); got != (tc.err == "" || tc.beyondSchema) {
				t.Errorf("the schema accepts it: %v; Parse: %v", got, err)
			}
		})
	}
}

// TestParseNeverQuotesValues: a refused request's reason goes to logs
// and to the dead-letter queue's attributes; the values in it may be
// secrets.
func TestParseNeverQuotesValues(t *testing.T) {
	const secret = "4242424242424242"
	for _, body := range []string{
		`{"start": {"saga": "order", "id": "o-1", "input": ["` + secret + `"]}}`,
		`{"start": {"saga": "order", "id": "o-1", "input": {"card": "` + secret + `"}, "x": 1}}`,
		`{"start": {"saga": "order", "id": "o-1", "input": {"card": "` + secret + `"`,
		`{"callback": {"token": "t", "output": "` + secret + `", "error": {"type": "X"}}}`,
		`{"callback": {"token": "t", "error": {"type": "X", "message": "` + strings.Repeat(secret, 300) + `"}}}`,
		`{"start": {"saga": "order", "id": ` + secret + `}}`,
		`{"signal": {"id": "o-1", "name": "a", "delivery": ` + secret + `}}`,
		`{"callback": {"token": ` + secret + `}}`,
	} {
		_, err := Parse([]byte(body))
		if err == nil {
			t.Fatalf("Parse accepted %s", body)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Parse: %v quotes a value", err)
		}
	}
}

func TestParseFillsSignalIDFromStart(t *testing.T) {
	r, err := Parse([]byte(`{"start": {"saga": "expense", "id": "c-1"}, "signal": {"name": "approved"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind() != "signal-with-start" || r.Signal.ID != "c-1" || r.SagaID() != "c-1" {
		t.Fatalf("kind %s, signal id %q, saga id %q", r.Kind(), r.Signal.ID, r.SagaID())
	}
}

// TestDocumentedRequestsParse: every request in docs/START_QUEUE.md's
// JSON blocks is one Parse and the schema accept.
func TestDocumentedRequestsParse(t *testing.T) {
	schema := loadSchema(t)
	b, err := os.ReadFile("../../docs/START_QUEUE.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, block := range strings.Split(string(b), "```json\n")[1:] {
		body, _, _ := strings.Cut(block, "```")
		n++
		if _, err := Parse([]byte(body)); err != nil {
			t.Errorf("docs/START_QUEUE.md, request %d: %v\n%s", n, err, body)
		}
		if !schemaAccepts(schema, []byte(body)) {
			t.Errorf("docs/START_QUEUE.md, request %d: the schema refuses it\n%s", n, body)
		}
	}
	if n < 5 {
		t.Fatalf("docs/START_QUEUE.md has %d JSON requests; want one of each kind at least", n)
	}
}

// FuzzParseAgreesWithSchema: what Parse accepts the schema accepts, and
// the other way round, so the documented contract is the one read.
func FuzzParseAgreesWithSchema(f *testing.F) {
	for _, tc := range requestCases {
		f.Add([]byte(tc.body))
	}
	schema := loadSchema(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Parse(body)
		if !json.Valid(body) {
			if err == nil {
				t.Fatalf("Parse accepted invalid JSON %q", body)
			}
			return
		}
		if repeatsKey(body) {
			// JSON Schema reads the last of repeated keys; Parse refuses
			// them, which TestParseRequests checks.
			if err == nil {
				t.Fatalf("Parse accepted a repeated key in %q", body)
			}
			return
		}
		if got := schemaAccepts(schema, body); got != (err == nil) && !(got && beyondSchema(err)) {
			t.Fatalf("schema accepts %q: %v; Parse: %v (%+v)", body, got, err, r)
		}
	})
}

// beyondSchema reports whether Parse refused a request for a rule JSON
// Schema cannot state.
func beyondSchema(err error) bool {
	var re *RequestError
	return errors.As(err, &re) && (strings.HasSuffix(re.Problem, "given twice") || strings.Contains(re.Problem, "is not the start's id"))
}

// repeatsKey reports whether any object in the JSON body repeats a key.
func repeatsKey(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // the next string token is a key
	}
	var stack []*frame
	for {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := t.(type) {
		case json.Delim:
			switch v {
			case '{':
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, &frame{object: true, keys: map[string]bool{}, key: true})
			case '[':
				if top != nil && top.object {
					top.key = true
				}
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.object && top.key {
				if top.keys[v] {
					return true
				}
				top.keys[v] = true
				top.key = false
				continue
			}
			if top != nil && top.object {
				top.key = true
			}
		default:
			if top != nil && top.object {
				top.key = true
			}
		}
	}
}
