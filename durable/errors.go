package durable

import "errors"

// Sentinel errors of the contract. Callers test for them with errors.Is.
var (
	// ErrNotFound: the saga or definition does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a conditional write lost against a concurrent writer.
	ErrConflict = errors.New("version conflict")
	// ErrExists: a create found an item with the same key already present.
	ErrExists = errors.New("already exists")
	// ErrMalformedMessage: a queue message could not be decoded; it must go to
	// the dead-letter queue untouched.
	ErrMalformedMessage = errors.New("malformed message")
	// ErrThrottled: the backend asked us to slow down; the operation may be retried.
	ErrThrottled = errors.New("throttled")
	// ErrTooLarge: a saga's state would exceed the size the store accepts.
	ErrTooLarge = errors.New("state too large")
)
