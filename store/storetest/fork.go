package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// exerciseFork holds the fork record: the per-fork count of ended
// children, by lane, that a fork's children update once each, with no
// read first (docs/PROTOCOL.md, "The fork record: lanes").
func exerciseFork(t *testing.T, newStore NewStore) {
	t.Run("ForkFirstCountCreates", func(t *testing.T) { testForkFirstCount(t, newStore(t)) })
	t.Run("ForkCountFromWrongCount", func(t *testing.T) { testForkWrongCount(t, newStore(t)) })
	t.Run("ForkCountsOfLanesConcurrent", func(t *testing.T) { testForkLanesConcurrent(t, newStore(t)) })
	t.Run("ForkCountsOfOneLaneConcurrent", func(t *testing.T) { testForkOneLaneConcurrent(t, newStore(t)) })
	t.Run("ForkFailedSetOnce", func(t *testing.T) { testForkFailedOnce(t, newStore(t)) })
	t.Run("ForkFailedConcurrent", func(t *testing.T) { testForkFailedConcurrent(t, newStore(t)) })
	t.Run("ForkStop", func(t *testing.T) { testForkStop(t, newStore(t)) })
	t.Run("ForkFail", func(t *testing.T) { testForkFail(t, newStore(t)) })
	t.Run("ForkCancelled", func(t *testing.T) { testForkCancelled(t, newStore(t)) })
	t.Run("ForkHundredLanes", func(t *testing.T) { testForkHundredLanes(t, newStore(t)) })
	t.Run("ForkBadParams", func(t *testing.T) { testForkBadParams(t, newStore(t)) })
	t.Run("ForkRecordsApartFromSagas", func(t *testing.T) { testForkApartFromSagas(t, newStore(t)) })
}

// fork is a record as the suite expects it.
func fork(key string, counts []int, stopped []int, failed int) durable.ForkRecord {
	return durable.ForkRecord{Key: key, Counts: counts, Stopped: stopped, Failed: failed}
}

// sameFork fails unless got is want (a nil and an empty slice are the same).
func sameFork(t *testing.T, what string, got *durable.ForkRecord, want durable.ForkRecord) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: no record, want %+v", what, want)
	}
	if got.Key != want.Key || !slices.Equal(got.Counts, want.Counts) || !slices.Equal(got.Stopped, want.Stopped) || got.Failed != want.Failed || !slices.Equal(got.Cancelled, want.Cancelled) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, *got, want)
	}
}

// forkStored fails unless the stored record, read with ForkGet, is want.
func forkStored(t *testing.T, s durable.Store, want durable.ForkRecord) {
	t.Helper()
	got, err := s.ForkGet(context.Background(), &durable.ForkGetParams{Key: want.Key})
	if err != nil {
		t.Fatalf("get fork %s: %v", want.Key, err)
	}
	sameFork(t, "stored", got, want)
}

func count(t *testing.T, s durable.Store, p durable.ForkCountParams) *durable.ForkRecord {
	t.Helper()
	r, err := s.ForkCount(context.Background(), &p)
	if err != nil {
		t.Fatalf("count %+v: %v", p, err)
	}
	return r
}

func testForkFirstCount(t *testing.T, s durable.Store) {
	ctx := context.Background()
	key := durable.ForkKey("order-7", "ship_all", 4)
	if _, err := s.ForkGet(ctx, &durable.ForkGetParams{Key: key}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("get before any count: %v, want ErrNotFound", err)
	}
	got := count(t, s, durable.ForkCountParams{Key: key, Lane: 3, Count: 0})
	want := fork(key, []int{0, 0, 0, 1}, nil, -1)
	sameFork(t, "first count's after-image", got, want)
	forkStored(t, s, want)
	if got.Count(3) != 1 || got.Count(0) != 0 || got.Count(99) != 0 || got.IsStopped(3) {
		t.Fatalf("Count and IsStopped of %+v", *got)
	}

	// The next counts of the lane, and of a lower one, each from what the
	// lane holds; every after-image is the whole record just after.
	sameFork(t, "second count of lane 3", count(t, s, durable.ForkCountParams{Key: key, Lane: 3, Count: 1}), fork(key, []int{0, 0, 0, 2}, nil, -1))
	sameFork(t, "first count of lane 1", count(t, s, durable.ForkCountParams{Key: key, Lane: 1, Count: 0}), fork(key, []int{0, 1, 0, 2}, nil, -1))
	sameFork(t, "a count of lane 5", count(t, s, durable.ForkCountParams{Key: key, Lane: 5, Count: 0}), fork(key, []int{0, 1, 0, 2, 0, 1}, nil, -1))
	forkStored(t, s, fork(key, []int{0, 1, 0, 2, 0, 1}, nil, -1))

	// Another fork of the same parent and step, at another visit, is
	// another record.
	other := durable.ForkKey("order-7", "ship_all", 5)
	if _, err := s.ForkGet(ctx, &durable.ForkGetParams{Key: other}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("get of another visit's fork: %v, want ErrNotFound", err)
	}

	// The record returned is the caller's: changing it changes nothing stored.
	got.Counts[3] = 42
	got.Stopped = append(got.Stopped, 7)
	forkStored(t, s, fork(key, []int{0, 1, 0, 2, 0, 1}, nil, -1))
}

// A count from a count the lane does not hold is ErrConflict and changes
// nothing, failed or not; on a fork with no record, it creates none.
func testForkWrongCount(t *testing.T, s durable.Store) {
	ctx := context.Background()
	key := durable.ForkKey("p", "each", 1)
	for _, m := range []int{1, 2} {
		_, err := s.ForkCount(ctx, &durable.ForkCountParams{Key: key, Lane: 0, Count: m, Failed: true, Child: 4})
		if !errors.Is(err, durable.ErrConflict) {
			t.Fatalf("count from %d with no record: %v, want ErrConflict", m, err)
		}
	}
	if _, err := s.ForkGet(ctx, &durable.ForkGetParams{Key: key}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("a count that lost created a record: get says %v", err)
	}

	count(t, s, durable.ForkCountParams{Key: key, Lane: 0, Count: 0})
	count(t, s, durable.ForkCountParams{Key: key, Lane: 0, Count: 1})
	want := fork(key, []int{2}, nil, -1)
	for _, p := range []durable.ForkCountParams{
		{Key: key, Lane: 0, Count: 0},                          // counted already (a repeated message)
		{Key: key, Lane: 0, Count: 1, Failed: true, Child: 2},  // counted already, now failing
		{Key: key, Lane: 0, Count: 3},                          // ahead of the lane
		{Key: key, Lane: 0, Count: 5, Failed: true, Child: 10}, // ahead, failing
		{Key: key, Lane: 1, Count: 1, Failed: true, Child: 3},  // a lane never counted holds 0
	} {
		if r, err := s.ForkCount(ctx, &p); !errors.Is(err, durable.ErrConflict) {
			t.Fatalf("count %+v: %v (record %v), want ErrConflict", p, err, r)
		}
		forkStored(t, s, want)
	}
}

// Counts of different lanes never conflict: 50 children, one per lane,
// ending at once, are all counted, twice over.
func testForkLanesConcurrent(t *testing.T, s durable.Store) {
	ctx := context.Background()
	key := durable.ForkKey("p", "each", 1)
	const lanes = 50
	for round := range 2 {
		var wg sync.WaitGroup
		errs := make([]error, lanes)
		for j := range lanes {
			wg.Go(func() {
				r, err := s.ForkCount(ctx, &durable.ForkCountParams{Key: key, Lane: j, Count: round})
				if err == nil && r.Count(j) != round+1 {
					err = fmt.Errorf("after-image holds %d for lane %d, want %d", r.Count(j), j, round+1)
				}
				errs[j] = err
			})
		}
		wg.Wait()
		for j, err := range errs {
			if err != nil {
				t.Fatalf("round %d, lane %d: %v", round, j, err)
			}
		}
	}
	want := make([]int, lanes)
	for j := range want {
		want[j] = 2
	}
	forkStored(t, s, fork(key, want, nil, -1))
}

// Of concurrent counts of one lane from one count (one child's ended
// message delivered many times), exactly one wins, at every count.
func testForkOneLaneConcurrent(t *testing.T, s durable.Store) {
	ctx := context.Background()
	key := durable.ForkKey("p", "each", 1)
	const writers = 16
	for m := range 3 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, lost := 0, 0
		for range writers {
			wg.Go(func() {
				r, err := s.ForkCount(ctx, &durable.ForkCountParams{Key: key, Lane: 7, Count: m})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && r.Count(7) == m+1:
					won++
				case errors.Is(err, durable.ErrConflict):
					lost++
				default:
					t.Errorf("count %d: %v, record %v", m, err, r)
				}
			})
		}
		wg.Wait()
		if won != 1 || lost != writers-1 {
			t.Fatalf("count of lane 7 from %d: %d won, %d lost, want 1 and %d", m, won, lost, writers-1)
		}
	}
	forkStored(t, s, fork(key, []int{0, 0, 0, 0, 0, 0, 0, 3}, nil, -1))
}

// The first child counted as failed is kept; every failed count stops its
// lane; a success after a failure is counted as any other.
func testForkFailedOnce(t *testing.T, s durable.Store) {
	key := durable.ForkKey("p", "each", 2)
	// A fork of 3 lanes: child k is lane k mod 3's child k div 3.
	sameFork(t, "child 2 fails", count(t, s, durable.ForkCountParams{Key: key, Lane: 2, Count: 0, Failed: true, Child: 2}),
		fork(key, []int{0, 0, 1}, []int{2}, 2))
	sameFork(t, "child 0 fails too", count(t, s, durable.ForkCountParams{Key: key, Lane: 0, Count: 0, Failed: true, Child: 0}),
		fork(key, []int{1, 0, 1}, []int{0, 2}, 2))
	sameFork(t, "child 1 succeeds", count(t, s, durable.ForkCountParams{Key: key, Lane: 1, Count: 0}),
		fork(key, []int{1, 1, 1}, []int{0, 2}, 2))
	sameFork(t, "child 4 fails", count(t, s, durable.ForkCountParams{Key: key, Lane: 1, Count: 1, Failed: true, Child: 4}),
		fork(key, []int{1, 2, 1}, []int{0, 1, 2}, 2))
	forkStored(t, s, fork(key, []int{1, 2, 1}, []int{0, 1, 2}, 2))

	// Child 0 is a valid failed child: Failed 0 is set, not taken for none.
	zero := durable.ForkKey("p", "each", 3)
	sameFork(t, "child 0 fails first", count(t, s, durable.ForkCountParams{Key: zero, Lane: 0, Count: 0, Failed: true, Child: 0}),
		fork(zero, []int{1}, []int{0}, 0))
	sameFork(t, "then child 1", count(t, s, durable.ForkCountParams{Key: zero, Lane: 1, Count: 0, Failed: true, Child: 1}),
		fork(zero, []int{1, 1}, []int{0, 1}, 0))
}

// Failures counted at once in different lanes: one is kept, and the
// after-images agree on which, as the count that set it saw first.
func testForkFailedConcurrent(t *testing.T, s durable.Store) {
	ctx := context.Background()
	key := durable.ForkKey("p", "each", 1)
	const lanes = 20
	var wg sync.WaitGroup
	images := make([]*durable.ForkRecord, lanes)
	errs := make([]error, lanes)
	for j := range lanes {
		wg.Go(func() {
			// child 100+j fails
			images[j], errs[j] = s.ForkCount(ctx, &durable.ForkCountParams{Key: key, Lane: j, Count: 0, Failed: true, Child: 100 + j})
		})
	}
	wg.Wait()
	for j, err := range errs {
		if err != nil {
			t.Fatalf("lane %d: %v", j, err)
		}
	}
	failed := images[0].Failed
	if failed < 100 || failed >= 100+lanes {
		t.Fatalf("failed child %d, want one of the children counted", failed)
	}
	for j, r := range images {
		if r.Failed != failed {
			t.Fatalf("lane %d's after-image has failed child %d, lane 0's %d", j, r.Failed, failed)
		}
		if !r.IsStopped(j) {
			t.Fatalf("lane %d's after-image does not have it stopped: %v", j, r.Stopped)
		}
	}
	// The count that set it saw no other: in its after-image, only its own lane is stopped.
	if first := images[failed-100]; !slices.Equal(first.Stopped, []int{failed - 100}) {
		t.Fatalf("the count that set failed child %d saw lanes %v stopped: another failure came first", failed, first.Stopped)
	}
	counts, stopped := make([]int, lanes), make([]int, lanes)
	for j := range lanes {
		counts[j], stopped[j] = 1, j
	}
	forkStored(t, s, fork(key, counts, stopped, failed))
}

func testForkStop(t *testing.T, s durable.Store) {
	ctx := context.Background()
	key := durable.ForkKey("p", "each", 1)
	stopLane := func(lane int) *durable.ForkRecord {
		t.Helper()
		r, err := s.ForkStop(ctx, &durable.ForkStopParams{Key: key, Lane: lane})
		if err != nil {
			t.Fatalf("stop lane %d: %v", lane, err)
		}
		return r
	}
	// The first stop creates the record; stopping again changes nothing.
	sameFork(t, "stop lane 5", stopLane(5), fork(key, nil, []int{5}, -1))
	sameFork(t, "stop lane 5 again", stopLane(5), fork(key, nil, []int{5}, -1))
	sameFork(t, "stop lane 2", stopLane(2), fork(key, nil, []int{2, 5}, -1))
	forkStored(t, s, fork(key, nil, []int{2, 5}, -1))
	// A stopped lane is still counted: its cancelled child ends too.
	sameFork(t, "count lane 5", count(t, s, durable.ForkCountParams{Key: key, Lane: 5, Count: 0}), fork(key, []int{0, 0, 0, 0, 0, 1}, []int{2, 5}, -1))
	sameFork(t, "fail lane 2", count(t, s, durable.ForkCountParams{Key: key, Lane: 2, Count: 0, Failed: true, Child: 8}), fork(key, []int{0, 0, 1, 0, 0, 1}, []int{2, 5}, 8))
	sameFork(t, "stop lane 0", stopLane(0), fork(key, []int{0, 0, 1, 0, 0, 1}, []int{0, 2, 5}, 8))
	forkStored(t, s, fork(key, []int{0, 0, 1, 0, 0, 1}, []int{0, 2, 5}, 8))
	// Stops at once, of one lane and of others, all land.
	var wg sync.WaitGroup
	for j := range 10 {
		wg.Go(func() {
			if _, err := s.ForkStop(ctx, &durable.ForkStopParams{Key: key, Lane: j % 5}); err != nil {
				t.Errorf("stop lane %d: %v", j%5, err)
			}
		})
	}
	wg.Wait()
	forkStored(t, s, fork(key, []int{0, 0, 1, 0, 0, 1}, []int{0, 1, 2, 3, 4, 5}, 8))
}

// ForkFail records a failure from outside the fork (a cancel of its
// parent): it creates the record, keeps the first failed child, stops no
// lane, and a count after it sees it.
func testForkFail(t *testing.T, s durable.Store) {
	ctx := context.Background()
	key := durable.ForkKey("p", "each", 2)
	fail := func(child int) *durable.ForkRecord {
		t.Helper()
		r, err := s.ForkFail(ctx, &durable.ForkFailParams{Key: key, Child: child})
		if err != nil {
			t.Fatalf("fail %d: %v", child, err)
		}
		return r
	}
	sameFork(t, "fail 10", fail(10), fork(key, nil, nil, 10))
	sameFork(t, "fail 3 after it", fail(3), fork(key, nil, nil, 10))
	sameFork(t, "count lane 1", count(t, s, durable.ForkCountParams{Key: key, Lane: 1, Count: 0}), fork(key, []int{0, 1}, nil, 10))
	forkStored(t, s, fork(key, []int{0, 1}, nil, 10))
	if _, err := s.ForkFail(ctx, &durable.ForkFailParams{Key: key, Child: -1}); err == nil || errors.Is(err, durable.ErrConflict) {
		t.Fatalf("a negative child: %v, want an error naming it", err)
	}
	// Many at once: one of them is kept.
	key2 := durable.ForkKey("p", "each", 3)
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			if _, err := s.ForkFail(ctx, &durable.ForkFailParams{Key: key2, Child: c}); err != nil {
				t.Errorf("fail %d: %v", c, err)
			}
		})
	}
	wg.Wait()
	r, err := s.ForkGet(ctx, &durable.ForkGetParams{Key: key2})
	if err != nil || r.Failed < 0 || r.Failed > 7 {
		t.Fatalf("after 8 concurrent fails: %+v %v", r, err)
	}
}

// ForkCancelled keeps the lanes a stop has cancelled: it creates the
// record, adds each lane once (a list may repeat one, and a later call
// may repeat earlier ones), changes no count, stop or failure, and every
// update and read after it returns them. Concurrent calls lose none.
func testForkCancelled(t *testing.T, s durable.Store) {
	ctx := context.Background()
	key := durable.ForkKey("p", "each", 5)
	cancelled := func(lanes ...int) {
		t.Helper()
		if err := s.ForkCancelled(ctx, &durable.ForkCancelledParams{Key: key, Lanes: lanes}); err != nil {
			t.Fatalf("cancelled %v: %v", lanes, err)
		}
	}
	cancelled(7, 2, 7)
	want := fork(key, nil, nil, -1)
	want.Cancelled = []int{2, 7}
	forkStored(t, s, want)
	r, err := s.ForkFail(ctx, &durable.ForkFailParams{Key: key, Child: 9})
	if err != nil {
		t.Fatal(err)
	}
	want.Failed = 9
	sameFork(t, "fail after it", r, want)
	cancelled(2, durable.MaxForkLanes-1, 0)
	want.Cancelled = []int{0, 2, 7, durable.MaxForkLanes - 1}
	want.Counts = []int{1}
	sameFork(t, "count lane 0", count(t, s, durable.ForkCountParams{Key: key, Lane: 0, Count: 0}), want)
	r, err = s.ForkStop(ctx, &durable.ForkStopParams{Key: key, Lane: 1})
	if err != nil {
		t.Fatal(err)
	}
	want.Stopped = []int{1}
	sameFork(t, "stop lane 1", r, want)
	forkStored(t, s, want)
	if !r.IsCancelled(7) || r.IsCancelled(3) {
		t.Fatalf("IsCancelled on %v: 7 %v, 3 %v", r.Cancelled, r.IsCancelled(7), r.IsCancelled(3))
	}
	for _, p := range []durable.ForkCancelledParams{{Key: key}, {Key: key, Lanes: []int{3, -1}}, {Key: key, Lanes: []int{durable.MaxForkLanes}}, {Key: "", Lanes: []int{1}},
		{Key: key, Every: durable.MaxForkLanes + 1}, {Key: key, Every: 2, Lanes: []int{1}}} {
		if err := s.ForkCancelled(ctx, &p); err == nil {
			t.Errorf("ForkCancelled(%+v) took bad params", p)
		}
	}
	forkStored(t, s, want)

	// Every lane of a fork of 3: exactly lanes 0 to 2.
	if err := s.ForkCancelled(ctx, &durable.ForkCancelledParams{Key: key, Every: 3}); err != nil {
		t.Fatal(err)
	}
	want.Cancelled = []int{0, 1, 2}
	forkStored(t, s, want)
	key3 := durable.ForkKey("p", "each", 7)
	if err := s.ForkCancelled(ctx, &durable.ForkCancelledParams{Key: key3, Every: durable.MaxForkLanes}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.ForkGet(ctx, &durable.ForkGetParams{Key: key3}); err != nil || len(r.Cancelled) != durable.MaxForkLanes || r.Cancelled[durable.MaxForkLanes-1] != durable.MaxForkLanes-1 {
		t.Fatalf("every lane of a fork of %d: %+v %v", durable.MaxForkLanes, r, err)
	}

	// Eight lanes at once, each from its own caller: all are kept.
	key2 := durable.ForkKey("p", "each", 6)
	var wg sync.WaitGroup
	for j := range 8 {
		wg.Go(func() {
			if err := s.ForkCancelled(ctx, &durable.ForkCancelledParams{Key: key2, Lanes: []int{j * 9}}); err != nil {
				t.Errorf("cancelled %d: %v", j*9, err)
			}
		})
	}
	wg.Wait()
	r, err = s.ForkGet(ctx, &durable.ForkGetParams{Key: key2})
	if err != nil || !slices.Equal(r.Cancelled, []int{0, 9, 18, 27, 36, 45, 54, 63}) {
		t.Fatalf("after 8 concurrent calls: %+v %v", r, err)
	}
}

// A fork of MaxForkLanes lanes under the longest key: every lane counted
// twice (the second time failed), every lane stopped.
func testForkHundredLanes(t *testing.T, s durable.Store) {
	key := durable.ForkKey(strings.Repeat("p", 128), strings.Repeat("s", 64), 1<<63)
	if len(key) > durable.MaxForkKeyBytes {
		t.Fatalf("ForkKey made a key of %d bytes", len(key))
	}
	counts, stopped := make([]int, durable.MaxForkLanes), make([]int, durable.MaxForkLanes)
	for j := range durable.MaxForkLanes {
		count(t, s, durable.ForkCountParams{Key: key, Lane: j, Count: 0})
		counts[j], stopped[j] = 2, j
	}
	for j := range durable.MaxForkLanes {
		// child 100+j, lane j's second, fails
		r := count(t, s, durable.ForkCountParams{Key: key, Lane: j, Count: 1, Failed: true, Child: 100 + j})
		if r.Count(j) != 2 || r.Failed != 100 || len(r.Stopped) != j+1 {
			t.Fatalf("lane %d: after-image %+v", j, *r)
		}
	}
	r, err := s.ForkStop(context.Background(), &durable.ForkStopParams{Key: key, Lane: durable.MaxForkLanes - 1})
	if err != nil {
		t.Fatal(err)
	}
	want := fork(key, counts, stopped, 100)
	sameFork(t, "the full record", r, want)
	forkStored(t, s, want)
}

func testForkBadParams(t *testing.T, s durable.Store) {
	ctx := context.Background()
	key := durable.ForkKey("p", "each", 1)
	for _, p := range []durable.ForkCountParams{
		{Key: key, Lane: -1},
		{Key: key, Lane: durable.MaxForkLanes},
		{Key: key, Lane: 0, Count: -1},
		{Key: key, Lane: 0, Failed: true, Child: -1},
		{Key: "", Lane: 0},
		{Key: strings.Repeat("k", durable.MaxForkKeyBytes+1), Lane: 0},
	} {
		if _, err := s.ForkCount(ctx, &p); err == nil || errors.Is(err, durable.ErrConflict) {
			t.Errorf("count %+v: %v, want an error that is not a conflict", p, err)
		}
	}
	for _, p := range []durable.ForkStopParams{{Key: key, Lane: -1}, {Key: key, Lane: durable.MaxForkLanes}, {Key: "", Lane: 0}} {
		if _, err := s.ForkStop(ctx, &p); err == nil {
			t.Errorf("stop %+v: no error", p)
		}
	}
	if _, err := s.ForkGet(ctx, &durable.ForkGetParams{}); err == nil || errors.Is(err, durable.ErrNotFound) {
		t.Errorf("get with no key: %v, want an error that is not ErrNotFound", err)
	}
	// None of them wrote anything.
	if _, err := s.ForkGet(ctx, &durable.ForkGetParams{Key: key}); !errors.Is(err, durable.ErrNotFound) {
		t.Errorf("after refused calls, get: %v, want ErrNotFound", err)
	}
}

// Fork records are not sagas: a key that is also a saga's id is another
// item, and no listing or due query shows a fork.
func testForkApartFromSagas(t *testing.T, s durable.Store) {
	ctx := context.Background()
	r := rec("s-1", 1, durable.StatusRunning, base, "x")
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
		t.Fatal(err)
	}
	w := timed("w-1", 1, base, base.Add(time.Minute))
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: w}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"s-1", durable.ForkKey("s-1", "each", 1), durable.ForkKey("w-1", "each", 1)} {
		count(t, s, durable.ForkCountParams{Key: key, Lane: 0, Count: 0, Failed: true, Child: 0})
		if _, err := s.ForkStop(ctx, &durable.ForkStopParams{Key: key, Lane: 1}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	if err != nil {
		t.Fatal(err)
	}
	sameRecord(t, got, r)
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: rec("s-1", 2, durable.StatusRunning, base, "y"), ExpectedVersion: 1}); err != nil {
		t.Fatalf("update of a saga beside a fork of its id: %v", err)
	}
	forkStored(t, s, fork("s-1", []int{1}, []int{0, 1}, 0))
	if all := listAll(t, s, durable.SagaListParams{}); !slices.Equal(ids(all), []string{"w-1", "s-1"}) && !slices.Equal(ids(all), []string{"s-1", "w-1"}) {
		t.Fatalf("listing every saga: %v, want s-1 and w-1", ids(all))
	}
	for _, st := range []durable.Status{durable.StatusRunning, durable.StatusWaiting, durable.StatusCompensating} {
		if got := listAll(t, s, durable.SagaListParams{Status: st, EnteredBefore: base.Add(time.Hour)}); len(got) > 1 {
			t.Fatalf("the sweep's listing of %s: %v, want one saga at most", st, ids(got))
		}
	}
	if due := listDue(t, s, base.Add(time.Hour), 0, ""); len(due) != 1 || due[0].SagaID != "w-1" {
		t.Fatalf("due timers: %+v, want only w-1", due)
	}
}
