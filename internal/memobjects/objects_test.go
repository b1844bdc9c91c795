package memobjects_test

import (
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/memobjects"
	"github.com/lambdasaga/lambdasaga/objects/objectstest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	objectstest.Exercise(t, func(*testing.T) durable.Objects { return memobjects.New() })
}
