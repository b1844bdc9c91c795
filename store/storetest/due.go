package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// exerciseDue holds the listing of due timers (SagaListDue) that the
// scheduled function reads every minute.
func exerciseDue(t *testing.T, newStore NewStore) {
	t.Run("SagaWakeAtRoundTrip", func(t *testing.T) { testWakeAtRoundTrip(t, newStore(t)) })
	t.Run("SagaListDue", func(t *testing.T) { testListDue(t, newStore(t)) })
	t.Run("SagaListDueFollowsUpdates", func(t *testing.T) { testListDueUpdates(t, newStore(t)) })
	t.Run("SagaListDueCursorIsStable", func(t *testing.T) { testListDueCursorStable(t, newStore(t)) })
	t.Run("SagaListDueBadParams", func(t *testing.T) { testListDueBadParams(t, newStore(t)) })
}

// timed is rec with a timer due at wake.
func timed(id string, version uint64, at, wake time.Time) durable.SagaRecord {
	r := rec(id, version, durable.StatusWaiting, at, "x")
	r.WakeAt = wake
	return r
}

// listDue pages through the due timers before before, with pages of limit,
// checking each page.
func listDue(t *testing.T, s durable.Store, before time.Time, limit int, cursor string) []durable.SagaDue {
	t.Helper()
	p := durable.SagaListDueParams{Before: before, Limit: limit, Cursor: cursor}
	var all []durable.SagaDue
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("listing does not end")
		}
		res, err := s.SagaListDue(context.Background(), &p)
		if err != nil {
			t.Fatal(err)
		}
		if limit > 0 && len(res.Sagas) > limit {
			t.Fatalf("page of %d, limit %d", len(res.Sagas), limit)
		}
		if res.NextCursor != "" && len(res.Sagas) == 0 {
			t.Fatal("an empty page with a cursor to more")
		}
		all = append(all, res.Sagas...)
		if res.NextCursor == "" {
			return all
		}
		p.Cursor = res.NextCursor
	}
}

// dueIDs renders a listing of timers as "id@minutes after base".
func dueIDs(ds []durable.SagaDue) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%s@%v", d.SagaID, d.WakeAt.Sub(base))
	}
	return fmt.Sprint(out)
}

func create(t *testing.T, s durable.Store, r durable.SagaRecord) {
	t.Helper()
	if err := s.SagaCreate(context.Background(), &durable.SagaCreateParams{Record: r}); err != nil {
		t.Fatal(err)
	}
}

func update(t *testing.T, s durable.Store, r durable.SagaRecord) {
	t.Helper()
	if err := s.SagaUpdate(context.Background(), &durable.SagaUpdateParams{Record: r, ExpectedVersion: r.Version - 1}); err != nil {
		t.Fatal(err)
	}
}

// testWakeAtRoundTrip: a saga's WakeAt reads back as written, to the
// nanosecond, before 1970 too; a saga without a timer reads back without.
func testWakeAtRoundTrip(t *testing.T, s durable.Store) {
	ctx := context.Background()
	for i, wake := range []time.Time{
		base.Add(30*24*time.Hour + 123456789),
		time.Date(1960, 5, 1, 0, 0, 0, 7, time.UTC),
		{},
	} {
		r := timed(fmt.Sprintf("s-%d", i), 1, base, wake)
		create(t, s, r)
		got, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: r.SagaID})
		if err != nil {
			t.Fatal(err)
		}
		sameRecord(t, got, r)
	}
	// An update that clears the timer reads back without one.
	r := timed("s-0", 2, base.Add(time.Minute), time.Time{})
	update(t, s, r)
	got, _ := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-0"})
	sameRecord(t, got, r)
}

// testListDue: earliest first (then by id), Before exclusive, in pages,
// and only the sagas with a timer.
func testListDue(t *testing.T, s durable.Store) {
	for i := range 12 {
		// Due at base + 0, 1, ..., 5 minutes, two sagas each; written in
		// an order unlike the timers'.
		create(t, s, timed(fmt.Sprintf("s-%02d", 11-i), 1, base, base.Add(time.Duration(i/2)*time.Minute)))
	}
	for i := range 5 {
		create(t, s, rec(fmt.Sprintf("plain-%d", i), 1, durable.StatusRunning, base, "x")) // no timer
	}
	want := "[s-10@0s s-11@0s s-08@1m0s s-09@1m0s s-06@2m0s s-07@2m0s]"
	for _, limit := range []int{0, 1, 2, 5, 6} {
		if got := dueIDs(listDue(t, s, base.Add(3*time.Minute), limit, "")); got != want {
			t.Errorf("due before base+3m in pages of %d:\n got %s\nwant %s (the bound is exclusive)", limit, got, want)
		}
	}
	if got := listDue(t, s, base, 0, ""); len(got) != 0 {
		t.Errorf("due before the first timer: %s", dueIDs(got))
	}
	// A far bound (2262 is where Unix nanoseconds end) gives every timer,
	// and none of the sagas without one.
	for _, year := range []int{2300, 9999} {
		if got := listDue(t, s, time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC), 5, ""); len(got) != 12 {
			t.Errorf("due before %d: %s, want the 12 timers", year, dueIDs(got))
		}
	}
	// A page that ends at the last timer has no cursor.
	res, err := s.SagaListDue(context.Background(), &durable.SagaListDueParams{Before: base.Add(time.Hour), Limit: 12})
	if err != nil || len(res.Sagas) != 12 || res.NextCursor != "" {
		t.Fatalf("one page of 12: %d sagas, cursor %q, %v", len(res.Sagas), res.NextCursor, err)
	}
}

// testListDueUpdates: the listing follows the timer through updates: one
// cleared leaves it, one moved moves, one kept stays, one set joins.
func testListDueUpdates(t *testing.T, s durable.Store) {
	for i := range 4 {
		create(t, s, timed(fmt.Sprintf("s-%d", i), 1, base, base.Add(time.Duration(i+1)*time.Minute)))
	}
	create(t, s, rec("s-4", 1, durable.StatusRunning, base, "x"))
	before := base.Add(time.Hour)
	if got, want := dueIDs(listDue(t, s, before, 0, "")), "[s-0@1m0s s-1@2m0s s-2@3m0s s-3@4m0s]"; got != want {
		t.Fatalf("before the updates:\n got %s\nwant %s", got, want)
	}
	// s-0's timer fired: it runs again, without one.
	cleared := rec("s-0", 2, durable.StatusRunning, base.Add(time.Minute), "y")
	update(t, s, cleared)
	// s-1 waits again, later; s-2 is written again with its timer as it was.
	update(t, s, timed("s-1", 2, base.Add(2*time.Minute), base.Add(10*time.Minute)))
	update(t, s, timed("s-2", 2, base, base.Add(3*time.Minute)))
	// s-4 starts waiting, and s-3's timer moves earlier.
	update(t, s, timed("s-4", 2, base.Add(time.Minute), base.Add(30*time.Second)))
	update(t, s, timed("s-3", 2, base, base.Add(time.Second)))
	if got, want := dueIDs(listDue(t, s, before, 2, "")), "[s-3@1s s-4@30s s-2@3m0s s-1@10m0s]"; got != want {
		t.Fatalf("after the updates:\n got %s\nwant %s", got, want)
	}
}

// testListDueCursorIsStable: the cursor is a place in the order: a timer
// set before it is not listed after it, one set after it is, and pages
// after it do not shift.
func testListDueCursorStable(t *testing.T, s durable.Store) {
	ctx := context.Background()
	for i := range 6 {
		create(t, s, timed(fmt.Sprintf("s-%d", i), 1, base, base.Add(time.Duration(i)*time.Minute)))
	}
	before := base.Add(time.Hour)
	page, err := s.SagaListDue(ctx, &durable.SagaListDueParams{Before: before, Limit: 3})
	if err != nil || len(page.Sagas) != 3 || page.NextCursor == "" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	create(t, s, timed("early", 1, base, base.Add(time.Second)))    // before the cursor
	create(t, s, timed("late", 1, base, base.Add(150*time.Second))) // after it: between s-2 and s-3
	if got, want := dueIDs(listDue(t, s, before, 2, page.NextCursor)), "[late@2m30s s-3@3m0s s-4@4m0s s-5@5m0s]"; got != want {
		t.Fatalf("after the cursor:\n got %s\nwant %s", got, want)
	}
	// A cursor past the bound lists nothing.
	if got := listDue(t, s, base.Add(time.Minute), 0, page.NextCursor); len(got) != 0 {
		t.Fatalf("after a cursor past the bound: %s", dueIDs(got))
	}
}

func testListDueBadParams(t *testing.T, s durable.Store) {
	ctx := context.Background()
	create(t, s, timed("s-1", 1, base, base))
	if _, err := s.SagaListDue(ctx, &durable.SagaListDueParams{}); err == nil {
		t.Error("a listing of due timers without Before gave no error")
	}
	if _, err := s.SagaListDue(ctx, &durable.SagaListDueParams{Before: base.Add(time.Hour), Cursor: "not a cursor"}); err == nil {
		t.Error("a bad cursor was taken")
	}
}
