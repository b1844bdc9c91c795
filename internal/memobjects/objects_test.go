package memobjects_test

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/memobjects"
	"github.com/lambdasaga/lambdasaga/objects/objectstest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	objectstest.Exercise(t, func(*testing.T) durable.Objects { return memobjects.New() })
}

// ObjectsEnd marks the saga's objects alone, counts a LIST per 1,000 keys
// and a COPY per object, and a put afterwards unmarks (as on S3, where a
// put replaces the tags).
func TestObjectsEndMarksTheSagasObjects(t *testing.T) {
	t.Parallel()
	o := memobjects.New()
	ctx := context.Background()
	key := func(id string, i int) string {
		return durable.ObjectKey(id, sha256.Sum256([]byte{byte(i), byte(i >> 8)}))
	}
	for i := range 1001 {
		if err := o.ObjectPut(ctx, &durable.ObjectPutParams{Key: key("o-1", i), Body: []byte{1}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.ObjectPut(ctx, &durable.ObjectPutParams{Key: key("o-1.a.1.0", 0), Body: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if err := o.ObjectsEnd(ctx, &durable.ObjectsEndParams{SagaID: "o-1"}); err != nil {
		t.Fatal(err)
	}
	if st := o.Stats(); st.Lists != 2 || st.Copies != 1001 {
		t.Errorf("stats %+v: want 2 LISTs and 1001 COPYs", st)
	}
	if o.Ended(key("o-1", 7)) != 1 || o.Ended(key("o-1.a.1.0", 0)) != 0 {
		t.Errorf("ended: the saga's %d, the child's %d; want 1 and 0", o.Ended(key("o-1", 7)), o.Ended(key("o-1.a.1.0", 0)))
	}
	if err := o.ObjectPut(ctx, &durable.ObjectPutParams{Key: key("o-1", 7), Body: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if o.Ended(key("o-1", 7)) != 0 {
		t.Error("a put after the mark: still marked")
	}
}
