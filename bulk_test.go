package lambdasaga_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/memstore"
)

// Bulk cancels every running saga of a name, telling its progress; run
// again, it skips them, saying why; a dry run acts on none.
func TestClientBulkCancel(t *testing.T) {
	t.Parallel()
	c, err := lambdasaga.NewBackendClient(memstore.New(), memqueue.New(memqueue.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	def := parse(t, "saga: ship\nsteps:\n  - {id: pack, action: box.pack}\n")
	for i := range 3 {
		if _, err := c.Start(ctx, def, lambdasaga.StartOptions{ID: fmt.Sprintf("ship-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	dry, err := c.Bulk(ctx, lambdasaga.BulkOptions{Verb: "cancel", Name: "ship", DryRun: true})
	if err != nil || len(dry.IDs) != 3 || !dry.DryRun {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	var told lambdasaga.BulkProgress
	res, err := c.Bulk(ctx, lambdasaga.BulkOptions{Verb: "cancel", Status: lambdasaga.StatusRunning, Name: "ship", Progress: func(p lambdasaga.BulkProgress) { told = p }})
	if err != nil || len(res.IDs) != 3 || told.Acted != 3 || told.Pages == 0 {
		t.Fatalf("cancel: %+v, progress %+v, %v", res, told, err)
	}
	again, err := c.Bulk(ctx, lambdasaga.BulkOptions{Verb: "cancel", Name: "ship"})
	if err != nil || len(again.IDs) != 0 || len(again.Skipped) != 3 || again.Skipped[0].Reason != "cancel already requested" {
		t.Fatalf("again: %+v %v", again, err)
	}
	for _, o := range []lambdasaga.BulkOptions{{Verb: "cancel"}, {Verb: "explode", All: true}, {Verb: "resume", Status: lambdasaga.StatusRunning}} {
		if _, err := c.Bulk(ctx, o); err == nil || !strings.Contains(err.Error(), o.Verb) {
			t.Errorf("%+v: %v, want it refused", o, err)
		}
	}
}
