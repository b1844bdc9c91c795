// Package objectstest is the contract every durable.Objects must meet: one
// suite, run against the memory implementation and against S3 (an
// emulator in process). A change to the objects' semantics lands here
// first.
package objectstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
)

// NewObjects returns an empty object store for one test; the suite calls it
// once per subtest.
type NewObjects func(t *testing.T) durable.Objects

// Exercise runs the whole suite.
func Exercise(t *testing.T, newObjects NewObjects) {
	t.Run("ObjectPutGet", func(t *testing.T) { testPutGet(t, newObjects(t)) })
	t.Run("ObjectGetMissing", func(t *testing.T) { testGetMissing(t, newObjects(t)) })
	t.Run("ObjectPutTwice", func(t *testing.T) { testPutTwice(t, newObjects(t)) })
	t.Run("ObjectPutConcurrent", func(t *testing.T) { testPutConcurrent(t, newObjects(t)) })
	t.Run("ObjectKeysOfChildren", func(t *testing.T) { testChildKeys(t, newObjects(t)) })
	t.Run("ObjectBodyIsCopied", func(t *testing.T) { testBodyCopied(t, newObjects(t)) })
	t.Run("ObjectEmpty", func(t *testing.T) { testEmpty(t, newObjects(t)) })
	t.Run("ObjectsEnd", func(t *testing.T) {
		o := newObjects(t)
		e, ok := o.(durable.ObjectsEnder)
		if !ok {
			t.Skip("not a durable.ObjectsEnder")
		}
		testEnd(t, o, e)
	})
	t.Run("ObjectLargest", func(t *testing.T) {
		if testing.Short() {
			t.Skip("32 MiB through the backend: not under -short")
		}
		testLargest(t, newObjects(t))
	})
}

// body is n bytes that differ with seed, and its key under saga id.
func body(id string, n int, seed byte) (string, []byte) {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return durable.ObjectKey(id, sha256.Sum256(b)), b
}

func put(t *testing.T, o durable.Objects, key string, b []byte) {
	t.Helper()
	if err := o.ObjectPut(context.Background(), &durable.ObjectPutParams{Key: key, Body: b}); err != nil {
		t.Fatalf("ObjectPut %s: %v", key, err)
	}
}

func get(t *testing.T, o durable.Objects, key string, want []byte) {
	t.Helper()
	got, err := o.ObjectGet(context.Background(), &durable.ObjectGetParams{Key: key})
	if err != nil {
		t.Fatalf("ObjectGet %s: %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("ObjectGet %s: %d bytes, not the %d put", key, len(got), len(want))
	}
}

func testPutGet(t *testing.T, o durable.Objects) {
	k1, b1 := body("o-1", 100<<10, 1)
	k2, b2 := body("o-1", 70<<10, 2)
	put(t, o, k1, b1)
	put(t, o, k2, b2)
	get(t, o, k1, b1)
	get(t, o, k2, b2)
}

func testGetMissing(t *testing.T, o durable.Objects) {
	k, b := body("o-1", 10, 1)
	_, err := o.ObjectGet(context.Background(), &durable.ObjectGetParams{Key: k})
	if !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("ObjectGet of a key never put: %v, want ErrNotFound", err)
	}
	put(t, o, k, b)
	other, _ := body("o-2", 10, 1) // the same body, another saga's
	if _, err := o.ObjectGet(context.Background(), &durable.ObjectGetParams{Key: other}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("ObjectGet of another saga's key for the same body: %v, want ErrNotFound", err)
	}
}

// A put repeated (a retry, a crash before the state's write) is harmless.
func testPutTwice(t *testing.T, o durable.Objects) {
	k, b := body("o-1", 65<<10, 3)
	put(t, o, k, b)
	put(t, o, k, b)
	get(t, o, k, b)
}

func testPutConcurrent(t *testing.T, o durable.Objects) {
	k, b := body("o-1", 80<<10, 4)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			if err := o.ObjectPut(context.Background(), &durable.ObjectPutParams{Key: k, Body: b}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent ObjectPut of one key: %v", err)
	}
	get(t, o, k, b)
}

// Every character a saga id may hold works in a key: child runs' ids have
// dots, users' colons and dashes.
func testChildKeys(t *testing.T, o durable.Objects) {
	for i, id := range []string{"o-1.pay.3.0", "c" + fmt.Sprintf("%040x", 7) + ".12", "tenant:42_x-y"} {
		k, b := body(id, 1<<10, byte(i))
		put(t, o, k, b)
		get(t, o, k, b)
	}
}

// The caller may reuse its buffer once ObjectPut returns.
func testBodyCopied(t *testing.T, o durable.Objects) {
	k, b := body("o-1", 4<<10, 5)
	want := bytes.Clone(b)
	put(t, o, k, b)
	for i := range b {
		b[i] = 0
	}
	get(t, o, k, want)
}

func testEmpty(t *testing.T, o durable.Objects) {
	k, b := body("o-1", 0, 0)
	put(t, o, k, b)
	get(t, o, k, b)
}

func testLargest(t *testing.T, o durable.Objects) {
	k, b := body("o-1", durable.MaxObjectBytes, 6)
	put(t, o, k, b)
	get(t, o, k, b)
}

// Marking a saga's objects ended keeps every body readable as it was, its
// own and its neighbours' (a child's id starts with its parent's); a
// saga without objects, and a second mark, are no errors.
func testEnd(t *testing.T, o durable.Objects, e durable.ObjectsEnder) {
	ctx := context.Background()
	type obj struct {
		key  string
		body []byte
	}
	var all []obj
	for i, id := range []string{"o-1", "o-1", "o-1", "o-1.pay.3.0", "o-10", "tenant:42_x-y"} {
		k, b := body(id, 9<<10, byte(i))
		put(t, o, k, b)
		all = append(all, obj{k, b})
	}
	for range 2 {
		if err := e.ObjectsEnd(ctx, &durable.ObjectsEndParams{SagaID: "o-1"}); err != nil {
			t.Fatalf("ObjectsEnd: %v", err)
		}
	}
	if err := e.ObjectsEnd(ctx, &durable.ObjectsEndParams{SagaID: "tenant:42_x-y"}); err != nil {
		t.Fatalf("ObjectsEnd of a saga id with a colon: %v", err)
	}
	if err := e.ObjectsEnd(ctx, &durable.ObjectsEndParams{SagaID: "o-2"}); err != nil {
		t.Fatalf("ObjectsEnd of a saga without objects: %v", err)
	}
	for _, x := range all {
		get(t, o, x.key, x.body)
	}
	// A value put again after the mark (the same body) reads the same.
	put(t, o, all[0].key, all[0].body)
	get(t, o, all[0].key, all[0].body)
}
