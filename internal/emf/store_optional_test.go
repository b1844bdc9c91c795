package emf_test

import (
	"bytes"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/emf"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
)

// The recorder's store keeps the pauses of the store it wraps: the engine
// finds them by type assertion, and a deployed function whose store lost
// them would run every paused step (the kill test found it).
func TestRecorderStoreKeepsPauses(t *testing.T) {
	rec := emf.New(emf.Config{Out: &bytes.Buffer{}, Function: "f"})
	if _, ok := rec.Store(memstore.New()).(durable.Pauses); !ok {
		t.Fatal("the recorder's store hides the pauses of the memory store")
	}
	var bare struct{ durable.Store }
	if _, ok := rec.Store(bare).(durable.Pauses); ok {
		t.Fatal("the recorder's store claims pauses its store does not keep")
	}
}
