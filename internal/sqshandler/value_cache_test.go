package sqshandler

import (
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/engine"
)

// The values a function keeps in memory are bounded by its memory: the
// engine's default bound (256 MiB of encoded values, more as Go values)
// would take a 256 MB function past its memory under many sagas.
func TestValueCacheFitsTheFunctionsMemory(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		memory string // AWS_LAMBDA_FUNCTION_MEMORY_SIZE, in MB
		want   int64
	}{
		{"", 0}, // not in Lambda: the engine's default
		{"128", 128 << 20 / valueCacheShare},
		{"256", 256 << 20 / valueCacheShare},
		{"10240", engine.DefaultValueCacheBytes},
		{"abc", 0},
	} {
		if got := valueCacheBytes(tt.memory); got != tt.want {
			t.Errorf("memory %q: cache of %d bytes, want %d", tt.memory, got, tt.want)
		}
		if tt.memory == "256" && valueCacheBytes(tt.memory) >= 256<<20/4 {
			t.Errorf("memory 256: a cache of %d bytes leaves too little for the rest", valueCacheBytes(tt.memory))
		}
	}
}
