package awscall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
)

// EnvFile names the file the recorders of one test run append to: the
// proxies in front of the emulators (tools/withemulators -calls FILE) and
// any fake AWS API a test serves itself (a fake Lambda Invoke, an S3
// emulator in the test's process).
const EnvFile = "LAMBDASAGA_AWS_CALLS"

// Entry is one line of a recording: a call the first time it is seen, a
// table's schema when it is created, or, when the recorder closes, how many
// calls each principal made.
type Entry struct {
	Call   *Call          `json:"call,omitempty"`
	Schema *TableSchema   `json:"schema,omitempty"`
	Counts map[string]int `json:"counts,omitempty"`
	// Unread is a request that was attributed to a principal but could
	// not be read as a call: the check fails on it rather than miss it.
	Unread string `json:"unread,omitempty"`
}

// Recorder appends what it sees to a file, each distinct call once. It is
// safe for concurrent use, and several processes may append to one file:
// each entry is one write of a whole line to a file opened for appending.
type Recorder struct {
	mu      sync.Mutex
	f       *os.File
	seen    map[string]bool
	counts  map[string]int
	schemas map[string]TableSchema
}

// Open returns a recorder appending to file, created if missing.
func Open(file string) (*Recorder, error) {
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("record AWS calls: %w", err)
	}
	return &Recorder{f: f, seen: map[string]bool{}, counts: map[string]int{}, schemas: map[string]TableSchema{}}, nil
}

// FromEnv opens the recorder EnvFile names; nil when it names none.
func FromEnv() (*Recorder, error) {
	file := os.Getenv(EnvFile)
	if file == "" {
		return nil, nil
	}
	return Open(file)
}

func (r *Recorder) write(e Entry) {
	line, _ := json.Marshal(e)
	_, _ = r.f.Write(append(line, '\n'))
}

// Observe records the request to service with body. Requests without a
// principal (unsigned, or signed with the harness's own key "local") are
// not lambdasaga's calls as deployed and are not recorded, but a table
// they create is: its schema says what a table is.
func (r *Recorder) Observe(service Service, req *http.Request, body []byte) {
	if r == nil {
		return
	}
	if p := principalOf(req); p == "" || p == "local" {
		if service != DynamoDB || target(req) != "CreateTable" {
			return // the harness's own call: only a table's schema is kept
		}
	}
	// Parsed outside the lock: the proxies serve many workers at once.
	schema := func(table string) (TableSchema, bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		s, ok := r.schemas[table]
		return s, ok
	}
	calls, s, err := ParseAll(service, req, body, schema)
	r.mu.Lock()
	defer r.mu.Unlock()
	if s != nil {
		r.schemas[s.Table] = *s
		r.write(Entry{Schema: s})
		return
	}
	principal := calls[0].Principal
	if principal == "" || principal == "local" {
		return
	}
	if err != nil {
		r.write(Entry{Unread: fmt.Sprintf("%s from %s: %v", service, principal, err)})
		return
	}
	r.counts[principal]++
	for _, call := range calls {
		if k := call.Shape(); !r.seen[k] {
			r.seen[k] = true
			r.write(Entry{Call: &call})
		}
	}
}

// Close writes the counts of calls by principal and closes the file.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.counts) > 0 {
		r.write(Entry{Counts: r.counts})
	}
	return r.f.Close()
}

// Handler records each request to service, then hands it to next.
func (r *Recorder) Handler(service Service, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		r.Observe(service, req, body)
		next.ServeHTTP(w, req)
	})
}

// Proxy returns a handler that records each request to service and passes
// it on to the emulator at target.
func (r *Recorder) Proxy(service Service, target string) (http.Handler, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", target, err)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	// A client gone mid-request (a worker the kill test killed) is no
	// error of the proxy's: answer 502, as the emulator would have been
	// unreachable, without a log line for each.
	p.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	return r.Handler(service, p), nil
}

// ReadFile reads a recording.
func ReadFile(file string) ([]Entry, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []Entry
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var e Entry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, e)
	}
	return out, nil
}
