package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/memobjects"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
)

const docSaga = `
saga: doc
input: {doc: string}
steps:
  - {id: file, action: docs.file, with: {doc: "${input.doc}"}}
`

// A client with the deployment's objects starts a saga with a 1 MiB
// input and reads it back whole, and can cancel it; one without shows
// the reference and refuses to act on the saga.
func TestClientWithObjectsActsOnLargeValues(t *testing.T) {
	t.Parallel()
	store, queue, objects := memstore.New(), memqueue.New(memqueue.Config{}), memobjects.New()
	c, err := client.New(client.Config{Store: store, Queue: queue, Objects: objects})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	doc := strings.Repeat("d", 1<<20)
	if _, err := c.Start(ctx, client.StartParams{File: "doc.yaml", Definition: []byte(docSaga), SagaID: "d-1", Input: map[string]any{"doc": doc}}); err != nil {
		t.Fatal(err)
	}
	if s := objects.Stats(); s.Puts != 1 {
		t.Fatalf("objects %+v: want the input put", s)
	}
	st, err := c.Status(ctx, "d-1")
	if err != nil || st.Input["doc"] != doc {
		t.Fatalf("status: %v; want the input whole", err)
	}

	bare, err := client.New(client.Config{Store: store, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := bare.Status(ctx, "d-1"); err != nil || !st.HasRefs() {
		t.Fatalf("status without objects: %v; want the reference shown", err)
	}
	if _, err := bare.Cancel(ctx, "d-1"); !errors.Is(err, engine.ErrNoObjects) {
		t.Fatalf("cancel without objects: %v, want ErrNoObjects", err)
	}
	if _, err := c.Cancel(ctx, "d-1"); err != nil {
		t.Fatalf("cancel with objects: %v", err)
	}
}
