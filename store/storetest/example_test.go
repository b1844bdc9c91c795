package storetest_test

import (
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
	"github.com/lambdasaga/lambdasaga/store/storetest"
)

// A store proves it keeps the contract by passing the suite, in a test of
// its own package; newStore gives each case a fresh, empty store (its own
// table or key prefix, for a real backend). memstore and store/dynamo
// run the same suite.
func ExampleExercise() {
	// In store_test.go of your store's package:
	_ = func(t *testing.T) {
		storetest.Exercise(t, func(t *testing.T) durable.Store { return memstore.New() })
	}
}
