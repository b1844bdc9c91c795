package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// ActionFunc runs one action call. Return an error to fail the attempt:
// retryable unless wrapped with saga.Permanent; saga.NewError gives it a type that
// catch clauses and retry.permanent match. The output must be JSON-like
// (maps, lists, strings, numbers, bools) or a value that encodes to JSON.
type ActionFunc func(ctx context.Context, call saga.Call) (any, error)

// Invoker runs action calls by name.
type Invoker interface {
	Invoke(ctx context.Context, call saga.Call) (any, error)
}

// Registry maps action names to Go functions. It is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	actions  map[string]ActionFunc
	fallback ActionFunc
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{actions: map[string]ActionFunc{}} }

// Register adds an action. Names are unique.
func (r *Registry) Register(name string, fn ActionFunc) error {
	if name == "" || fn == nil {
		return fmt.Errorf("register action: a name and a function are required")
	}
	if !lang.ValidActionName(name) || strings.HasPrefix(name, "lambda:") {
		return fmt.Errorf("register action %q: not a name a definition can call (a letter, then letters, digits, '_', '.', '-' or '/'; lambda: names are invoked, not registered)", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.actions[name]; dup {
		return fmt.Errorf("register action %q: already registered", name)
	}
	r.actions[name] = fn
	return nil
}

// MustRegister is Register for program set-up: it panics on a duplicate.
func (r *Registry) MustRegister(name string, fn ActionFunc) {
	if err := r.Register(name, fn); err != nil {
		panic(err)
	}
}

// SetFallback sets the function that runs actions nobody registered
// (sagactl run uses one that echoes its input). Without one, such a call
// fails permanently with ActionNotFound.
func (r *Registry) SetFallback(fn ActionFunc) {
	r.mu.Lock()
	r.fallback = fn
	r.mu.Unlock()
}

// Has reports whether name is registered.
func (r *Registry) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.actions[name]
	return ok
}

// Names lists the registered actions, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.actions))
	for n := range r.actions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Invoke runs the action the call names.
func (r *Registry) Invoke(ctx context.Context, call saga.Call) (any, error) {
	r.mu.RLock()
	fn, ok := r.actions[call.Action]
	fb := r.fallback
	r.mu.RUnlock()
	switch {
	case ok:
		return fn(ctx, call)
	case fb != nil:
		return fb(ctx, call)
	}
	return nil, saga.Permanent(saga.NewError(lang.ErrorTypeActionNotFound, fmt.Sprintf("no action %q is registered", call.Action)))
}

// Typed adapts a function with typed input and output: the call's input is
// decoded from JSON into In, and Out is returned for the engine to store.
// An input that does not decode is a permanent error.
func Typed[In, Out any](fn func(ctx context.Context, call saga.Call, in In) (Out, error)) ActionFunc {
	return func(ctx context.Context, call saga.Call) (any, error) {
		var in In
		raw, err := json.Marshal(call.Input)
		if err == nil {
			err = json.Unmarshal(raw, &in)
		}
		if err != nil {
			return nil, saga.Permanent(saga.NewError("InvalidActionInput", fmt.Sprintf("action %s: input does not fit %T: %v", call.Action, in, err)))
		}
		return fn(ctx, call, in)
	}
}
