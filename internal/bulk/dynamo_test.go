package bulk_test

import (
	"context"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
	"github.com/lambdasaga/lambdasaga/internal/bulk"
)

// On DynamoDB (the emulator), a run pages through the by_status index's
// shards with its cursor: every running saga of the name is cancelled
// once, the other name's are read and left, and a run again skips them.
func TestRunOnDynamoDB(t *testing.T) {
	if testing.Short() {
		t.Skip("emulators")
	}
	t.Parallel()
	b := awstest.New(t)
	r := newRig(t, b.Store, b.Queue)
	ships := r.start(t, "ship", 23)
	others := r.start(t, "other", 4)
	ctx := context.Background()
	pages := 0
	res, err := bulk.Run(ctx, r.coord, bulk.Params{Verb: cancelVerb(t), Status: durable.StatusRunning, Name: "ship", PageSize: 10,
		Progress: func(p bulk.Progress) { pages = p.Pages }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Read != 27 || res.Acted() != 23 || len(res.Failed) != 0 || pages != 3 {
		t.Fatalf("read %d, acted %d, failed %v, %d pages; want 27 read, 23 acted, 3 pages", res.Read, res.Acted(), res.Failed, pages)
	}
	if got := r.cancelRequested(t, ships); len(got) != 23 {
		t.Errorf("%d of the ship sagas cancelled, want 23", len(got))
	}
	if got := r.cancelRequested(t, others); len(got) != 0 {
		t.Errorf("other sagas cancelled: %v", got)
	}
	again, err := bulk.Run(ctx, r.coord, bulk.Params{Verb: cancelVerb(t), Status: durable.StatusRunning, Name: "ship", PageSize: 10})
	if err != nil || again.Acted() != 0 || len(again.Skipped) != 23 {
		t.Fatalf("again: acted %d, skipped %d, %v", again.Acted(), len(again.Skipped), err)
	}
}
