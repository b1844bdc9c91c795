package emf_test

import (
	"bytes"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/emf"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
)

// The recorder's store keeps the optional capabilities of the store it
// wraps, pauses and action limits: the engine finds them by type
// assertion, and a deployed function whose store lost them would run
// every paused step (the kill test found it) and every call over its
// limit.
func TestRecorderStoreKeepsPausesAndLimits(t *testing.T) {
	rec := emf.New(emf.Config{Out: &bytes.Buffer{}, Function: "f"})
	s := rec.Store(memstore.New())
	if _, ok := s.(durable.Pauses); !ok {
		t.Error("the recorder's store hides the pauses of the memory store")
	}
	if _, ok := s.(durable.Limiter); !ok {
		t.Error("the recorder's store hides the limits of the memory store")
	}
	var bare struct{ durable.Store }
	if _, ok := rec.Store(bare).(durable.Pauses); ok {
		t.Error("the recorder's store claims pauses its store does not keep")
	}
	if _, ok := rec.Store(bare).(durable.Limiter); ok {
		t.Error("the recorder's store claims limits its store does not keep")
	}
	var pausesOnly struct {
		durable.Store
		durable.Pauses
	}
	pausesOnly.Pauses = memstore.New()
	if _, ok := rec.Store(pausesOnly).(durable.Limiter); ok {
		t.Error("the recorder's store claims limits beside pauses its store does not keep")
	}
}
