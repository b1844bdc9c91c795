package dynamo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awstest"
)

// What the listing of due timers reads, as DynamoDB bills it: when nothing
// is due, one query per shard that finds nothing (32 queries, half a read
// unit each); with 3,200 timers of which 320 are due, the due entries, each
// about once (a page reads what it returns and a few entries per shard,
// which the next page reads again), and none of the 2,880 that are not: a
// timer is read by no listing until it is due, however far away it is.
func TestDueListingReadsOnlyTheDue(t *testing.T) {
	t.Parallel()
	b := awstest.New(t)
	ctx := context.Background()
	const timers, due = 3200, 320
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	errs := make(chan error, timers)
	sem := make(chan struct{}, 32)
	for i := range timers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			// Timer i is due at base + i seconds; the others wait up to 30 days more.
			wake := base.Add(time.Duration(i) * time.Second)
			if i >= due {
				wake = wake.Add(time.Duration(i) * 13 * time.Minute)
			}
			errs <- b.Store.SagaCreate(ctx, &durable.SagaCreateParams{Record: durable.SagaRecord{SagaID: fmt.Sprintf("s-%05d", i), Version: 1,
				Status: durable.StatusWaiting, Name: "order", DefinitionHash: "h", CreatedAt: base, StatusSince: base, UpdatedAt: base, WakeAt: wake, State: []byte("x")}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	b.Counter.Reset()
	res, err := b.Store.SagaListDue(ctx, &durable.SagaListDueParams{Before: base})
	if err != nil || len(res.Sagas) != 0 {
		t.Fatalf("due before the first timer: %v, %v", res, err)
	}
	if q := b.Counter.Snapshot()["DynamoDB.Query"]; q.Calls != 32 || q.Unbilled != 0 || q.BilledReadUnits != 16 {
		t.Errorf("nothing due: %d queries (%d unbilled) billed %v read units; want 32 queries, 16 units", q.Calls, q.Unbilled, q.BilledReadUnits)
	}

	s, entries, queries := countingStore(t, b)
	b.Counter.Reset()
	p := durable.SagaListDueParams{Before: base.Add(due * time.Second), Limit: 100}
	listed, pages := 0, 0
	for {
		res, err := s.SagaListDue(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Sagas {
			if want := fmt.Sprintf("s-%05d", listed); d.SagaID != want || !d.WakeAt.Equal(base.Add(time.Duration(listed)*time.Second)) {
				t.Fatalf("timer %d: %s at %s, want %s at %s", listed, d.SagaID, d.WakeAt, want, base.Add(time.Duration(listed)*time.Second))
			}
			listed++
		}
		pages++
		if res.NextCursor == "" {
			break
		}
		p.Cursor = res.NextCursor
	}
	q := b.Counter.Snapshot()["DynamoDB.Query"]
	t.Logf("%d due of %d timers in %d pages of 100: %d queries read %d index entries (%.1f per timer listed), billed %.1f read units",
		listed, timers, pages, queries.Load(), entries.Load(), float64(entries.Load())/float64(listed), q.BilledReadUnits)
	if listed != due {
		t.Fatalf("listed %d timers, want %d", listed, due)
	}
	if entries.Load() > 3*due {
		t.Errorf("listing %d due timers read %d index entries: more than the due ones, about once each", listed, entries.Load())
	}
	// Every query reads under 4 KB (entries of about 80 bytes): half a unit each.
	if q.Unbilled != 0 || q.Calls != int(queries.Load()) || q.BilledReadUnits != float64(q.Calls)/2 {
		t.Errorf("%d queries (%d unbilled) billed %.1f read units; want half a unit each", q.Calls, q.Unbilled, q.BilledReadUnits)
	}
}
