// Package storetest is the contract every durable.Store must meet: one
// suite, run against the memory store and against DynamoDB. A change to
// storage semantics lands here first.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// NewStore returns an empty store for one test; the suite calls it once per subtest.
type NewStore func(t *testing.T) durable.Store

// Exercise runs the whole suite.
func Exercise(t *testing.T, newStore NewStore) {
	t.Run("SagaCreateGet", func(t *testing.T) { testCreateGet(t, newStore(t)) })
	t.Run("SagaCreateExists", func(t *testing.T) { testCreateExists(t, newStore(t)) })
	t.Run("SagaGetMissing", func(t *testing.T) { testGetMissing(t, newStore(t)) })
	t.Run("SagaUpdateConditional", func(t *testing.T) { testUpdate(t, newStore(t)) })
	t.Run("SagaUpdateConcurrent", func(t *testing.T) { testConcurrentUpdate(t, newStore(t)) })
	t.Run("SagaUpdateKeepsDeliveries", func(t *testing.T) { testKeptDeliveries(t, newStore(t)) })
	t.Run("SagaList", func(t *testing.T) { testList(t, newStore(t)) })
	t.Run("SagaListCursorIsStable", func(t *testing.T) { testListCursorStable(t, newStore(t)) })
	t.Run("SagaListEnteredBefore", func(t *testing.T) { testListEnteredBefore(t, newStore(t)) })
	t.Run("SagaSetResends", func(t *testing.T) { testSetResends(t, newStore(t)) })
	t.Run("SagaChildren", func(t *testing.T) { testChildren(t, newStore(t)) })
	t.Run("Definitions", func(t *testing.T) { testDefinitions(t, newStore(t)) })
	t.Run("DefinitionDeploy", func(t *testing.T) { testDefinitionDeploy(t, newStore(t)) })
	t.Run("LargeState", func(t *testing.T) { testLargeState(t, newStore(t)) })
	exerciseEdges(t, newStore)
	exerciseDue(t, newStore)
	exerciseFork(t, newStore)
	exerciseExpire(t, newStore)
	exercisePauses(t, newStore)
	exerciseLimits(t, newStore)
}

var base = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// rec is a saga record written at time at, in its status since then.
func rec(id string, version uint64, status durable.Status, at time.Time, state string) durable.SagaRecord {
	return durable.SagaRecord{SagaID: id, Version: version, Status: status, Name: "order", DefinitionHash: "h1",
		CreatedAt: base, StatusSince: at, UpdatedAt: at, State: []byte(state)}
}

func sameRecord(t *testing.T, got *durable.SagaRecord, want durable.SagaRecord) {
	t.Helper()
	if got.SagaID != want.SagaID || got.Version != want.Version || got.Status != want.Status || got.Name != want.Name ||
		got.DefinitionHash != want.DefinitionHash || !got.CreatedAt.Equal(want.CreatedAt) || !got.StatusSince.Equal(want.StatusSince) ||
		!got.UpdatedAt.Equal(want.UpdatedAt) || !got.WakeAt.Equal(want.WakeAt) || !bytes.Equal(got.State, want.State) || got.Resends != want.Resends || got.Received != want.Received ||
		got.Child != want.Child || got.Unlisted != want.Unlisted {
		t.Fatalf("record:\n got %+v\nwant %+v", *got, want)
	}
}

// listAll pages through a listing with pages of limit, checking each page.
func listAll(t *testing.T, s durable.Store, p durable.SagaListParams) []durable.SagaSummary {
	t.Helper()
	var all []durable.SagaSummary
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("listing does not end")
		}
		res, err := s.SagaList(context.Background(), &p)
		if err != nil {
			t.Fatal(err)
		}
		if p.Limit > 0 && len(res.Sagas) > p.Limit {
			t.Fatalf("page of %d, limit %d", len(res.Sagas), p.Limit)
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

func ids(sms []durable.SagaSummary) []string {
	out := make([]string, len(sms))
	for i, sm := range sms {
		out[i] = sm.SagaID
	}
	return out
}

// Children of a fork: a branch or iteration (unlisted) is read back as
// written, is in no listing, by status or not, and its timer is listed
// due; a child saga (listed) is listed; both keep their marks across an
// update.
func testChildren(t *testing.T, s durable.Store) {
	ctx := context.Background()
	branch := rec("p-1.book.1.0", 1, durable.StatusWaiting, base, "b")
	branch.Child, branch.Unlisted, branch.WakeAt = true, true, base.Add(time.Minute)
	child := rec("p-1.pay.2.0", 1, durable.StatusRunning, base.Add(time.Second), "c")
	child.Child = true
	top := rec("p-1", 1, durable.StatusWaiting, base.Add(2*time.Second), "p")
	for _, r := range []durable.SagaRecord{branch, child, top} {
		if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []durable.SagaRecord{branch, child, top} {
		got, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: want.SagaID})
		if err != nil {
			t.Fatal(err)
		}
		sameRecord(t, got, want)
	}
	if got := ids(listAll(t, s, durable.SagaListParams{})); !slices.Equal(got, []string{"p-1", "p-1.pay.2.0"}) {
		t.Fatalf("listed %v, want the parent and the child saga", got)
	}
	if got := ids(listAll(t, s, durable.SagaListParams{Status: durable.StatusWaiting})); !slices.Equal(got, []string{"p-1"}) {
		t.Fatalf("waiting: listed %v", got)
	}
	due, err := s.SagaListDue(ctx, &durable.SagaListDueParams{Before: base.Add(time.Hour)})
	if err != nil || len(due.Sagas) != 1 || due.Sagas[0].SagaID != branch.SagaID {
		t.Fatalf("due: %+v %v", due, err)
	}
	next := branch
	next.Version, next.Status, next.WakeAt, next.State = 2, durable.StatusSucceeded, time.Time{}, []byte("b2")
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: next, ExpectedVersion: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: next.SagaID})
	if err != nil {
		t.Fatal(err)
	}
	sameRecord(t, got, next)
	if got := ids(listAll(t, s, durable.SagaListParams{Status: durable.StatusSucceeded})); len(got) != 0 {
		t.Fatalf("succeeded: listed %v", got)
	}
}

func testCreateGet(t *testing.T, s durable.Store) {
	ctx := context.Background()
	r := rec("s-1", 1, durable.StatusRunning, base, "state-1")
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	if err != nil {
		t.Fatal(err)
	}
	sameRecord(t, got, r)
	// The store keeps its own copy: changing what we passed or got changes nothing.
	r.State[0] = 'X'
	got.State[1] = 'Y'
	again, _ := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	if string(again.State) != "state-1" {
		t.Fatalf("stored state changed through a caller's slice: %q", again.State)
	}
}

func testCreateExists(t *testing.T, s durable.Store) {
	ctx := context.Background()
	r := rec("s-1", 1, durable.StatusRunning, base, "a")
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
		t.Fatal(err)
	}
	r2 := rec("s-1", 1, durable.StatusRunning, base, "b")
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r2}); !errors.Is(err, durable.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	got, _ := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	if string(got.State) != "a" {
		t.Fatal("second create overwrote the first")
	}
}

func testGetMissing(t *testing.T, s durable.Store) {
	ctx := context.Background()
	if _, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "nope"}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("get: %v, want ErrNotFound", err)
	}
	err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: rec("nope", 2, durable.StatusRunning, base, "x"), ExpectedVersion: 1})
	if !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("update: %v, want ErrNotFound", err)
	}
	if _, err := s.DefinitionGet(ctx, &durable.DefinitionGetParams{Hash: "nope"}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("definition: %v, want ErrNotFound", err)
	}
}

func testUpdate(t *testing.T, s durable.Store) {
	ctx := context.Background()
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: rec("s-1", 1, durable.StatusRunning, base, "v1")}); err != nil {
		t.Fatal(err)
	}
	v2 := rec("s-1", 2, durable.StatusCompensating, base.Add(time.Second), "v2")
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: v2, ExpectedVersion: 1}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	sameRecord(t, got, v2)
	// The same transition again (a redelivered message) must lose.
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: rec("s-1", 2, durable.StatusRunning, base, "fork"), ExpectedVersion: 1}); !errors.Is(err, durable.ErrConflict) {
		t.Fatalf("stale update: %v, want ErrConflict", err)
	}
	// Neither a version from the future.
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: rec("s-1", 6, durable.StatusRunning, base, "future"), ExpectedVersion: 5}); !errors.Is(err, durable.ErrConflict) {
		t.Fatalf("future update: %v, want ErrConflict", err)
	}
	got, _ = s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	sameRecord(t, got, v2)
}

// A write that keeps a delivery keeps the version and counts Received up;
// a transition that read the saga before it loses, however its version
// matches, and one that read it after wins.
func testKeptDeliveries(t *testing.T, s durable.Store) {
	ctx := context.Background()
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: rec("s-1", 1, durable.StatusRunning, base, "v1")}); err != nil {
		t.Fatal(err)
	}
	kept := rec("s-1", 1, durable.StatusRunning, base, "v1+signal")
	kept.Received = 1
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: kept, ExpectedVersion: 1}); err != nil {
		t.Fatalf("keep: %v", err)
	}
	got, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	if err != nil || got.Received != 1 || got.Version != 1 {
		t.Fatalf("after keeping: %+v %v", got, err)
	}
	sameRecord(t, got, kept)
	// The action's transition, computed from the read before the keep, loses.
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: rec("s-1", 2, durable.StatusRunning, base, "v2-blind"), ExpectedVersion: 1}); !errors.Is(err, durable.ErrConflict) {
		t.Fatalf("a write that read before the keep: %v, want ErrConflict", err)
	}
	// A second keep that read before the first loses too.
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: kept, ExpectedVersion: 1}); !errors.Is(err, durable.ErrConflict) {
		t.Fatalf("a second keep from the same read: %v, want ErrConflict", err)
	}
	v2 := rec("s-1", 2, durable.StatusRunning, base.Add(time.Second), "v2")
	v2.Received = 1
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: v2, ExpectedVersion: 1, ExpectedReceived: 1}); err != nil {
		t.Fatalf("a write that read after the keep: %v", err)
	}
	got, _ = s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	sameRecord(t, got, v2)
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: rec("s-1", 3, durable.StatusRunning, base, "v3"), ExpectedVersion: 2, ExpectedReceived: 5}); !errors.Is(err, durable.ErrConflict) {
		t.Fatalf("a wrong received count: %v, want ErrConflict", err)
	}
}

func testConcurrentUpdate(t *testing.T, s durable.Store) {
	ctx := context.Background()
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: rec("s-1", 1, durable.StatusRunning, base, "v1")}); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			errs[i] = s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: rec("s-1", 2, durable.StatusRunning, base, fmt.Sprintf("writer-%d", i)), ExpectedVersion: 1})
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both won", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, durable.ErrConflict):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no writer won")
	}
	got, _ := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	if string(got.State) != fmt.Sprintf("writer-%d", won) || got.Version != 2 {
		t.Fatalf("stored %q v%d, winner was %d", got.State, got.Version, won)
	}
}

func testList(t *testing.T, s durable.Store) {
	ctx := context.Background()
	statuses := []durable.Status{durable.StatusRunning, durable.StatusSucceeded, durable.StatusCompensated}
	for i := range 25 {
		r := rec(fmt.Sprintf("s-%02d", i), 1, statuses[i%3], base.Add(time.Duration(i)*time.Second), "x")
		if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
			t.Fatal(err)
		}
	}
	// s-00 changes status last: it moves to the front.
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: rec("s-00", 2, durable.StatusSucceeded, base.Add(time.Hour), "y"), ExpectedVersion: 1}); err != nil {
		t.Fatal(err)
	}
	// s-03 is updated later still, but keeps its status: it keeps its place.
	kept := rec("s-03", 2, durable.StatusRunning, base.Add(2*time.Hour), "z")
	kept.StatusSince = base.Add(3 * time.Second)
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: kept, ExpectedVersion: 1}); err != nil {
		t.Fatal(err)
	}
	all := listAll(t, s, durable.SagaListParams{Limit: 10})
	want := []string{"s-00"}
	for i := 24; i >= 1; i-- {
		want = append(want, fmt.Sprintf("s-%02d", i))
	}
	if got := ids(all); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("order:\n got %v\nwant %v", got, want)
	}
	first, third := all[0], all[len(all)-3] // s-00 and s-03
	if first.Status != durable.StatusSucceeded || !first.StatusSince.Equal(base.Add(time.Hour)) || !first.CreatedAt.Equal(base) ||
		first.Name != "order" || first.DefinitionHash != "h1" {
		t.Fatalf("summary of s-00: %+v", first)
	}
	if third.SagaID != "s-03" || !third.StatusSince.Equal(base.Add(3*time.Second)) {
		t.Fatalf("summary of s-03: %+v", third)
	}
	// A page that ends at the last saga has no cursor.
	if res, err := s.SagaList(ctx, &durable.SagaListParams{Limit: 25}); err != nil || len(res.Sagas) != 25 || res.NextCursor != "" {
		t.Fatalf("one page: %d sagas, cursor %q, %v", len(res.Sagas), res.NextCursor, err)
	}
	comp := listAll(t, s, durable.SagaListParams{Status: durable.StatusCompensated, Limit: 3})
	if len(comp) != 8 {
		t.Fatalf("compensated: %d sagas, want 8", len(comp))
	}
	for i, sm := range comp {
		if sm.Status != durable.StatusCompensated {
			t.Fatalf("listed a %s saga under compensated", sm.Status)
		}
		if i > 0 && sm.StatusSince.After(comp[i-1].StatusSince) {
			t.Fatal("not newest first")
		}
	}
	res, err := s.SagaList(ctx, &durable.SagaListParams{Status: durable.StatusWaiting})
	if err != nil || len(res.Sagas) != 0 || res.NextCursor != "" {
		t.Fatalf("waiting: %v %v", res, err)
	}
	if _, err := s.SagaList(ctx, &durable.SagaListParams{Cursor: "not a cursor"}); err == nil {
		t.Fatal("a bad cursor was taken")
	}
}

// testListCursorStable: a cursor names a place in the order, so sagas that
// start or change status meanwhile (all moving to the front) neither shift
// the pages after it nor show up on them.
func testListCursorStable(t *testing.T, s durable.Store) {
	ctx := context.Background()
	for i := range 12 {
		r := rec(fmt.Sprintf("s-%02d", i), 1, durable.StatusRunning, base.Add(time.Duration(i)*time.Minute), "x")
		if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.SagaList(ctx, &durable.SagaListParams{Status: durable.StatusRunning, Limit: 5})
	if err != nil || len(page.Sagas) != 5 || page.NextCursor == "" {
		t.Fatalf("first page: %v %v", page, err)
	}
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: rec("s-new", 1, durable.StatusRunning, base.Add(time.Hour), "x")}); err != nil {
		t.Fatal(err)
	}
	// s-03, on a later page, fails: it leaves running for compensating.
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: rec("s-03", 2, durable.StatusCompensating, base.Add(time.Hour), "y"), ExpectedVersion: 1}); err != nil {
		t.Fatal(err)
	}
	rest := listAll(t, s, durable.SagaListParams{Status: durable.StatusRunning, Limit: 5, Cursor: page.NextCursor})
	if got, want := fmt.Sprint(ids(rest)), "[s-06 s-05 s-04 s-02 s-01 s-00]"; got != want {
		t.Fatalf("after the cursor: %s, want %s", got, want)
	}
}

// testListEnteredBefore: the sweep's listing, of sagas in their status for
// a while.
func testListEnteredBefore(t *testing.T, s durable.Store) {
	ctx := context.Background()
	for i := range 6 {
		r := rec(fmt.Sprintf("s-%d", i), 1, durable.StatusRunning, base.Add(time.Duration(i)*time.Minute), "x")
		if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
			t.Fatal(err)
		}
	}
	// s-0 was written again since, keeping its status: still old.
	moved := rec("s-0", 2, durable.StatusRunning, base.Add(time.Hour), "y")
	moved.StatusSince = base
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: moved, ExpectedVersion: 1}); err != nil {
		t.Fatal(err)
	}
	got := listAll(t, s, durable.SagaListParams{Status: durable.StatusRunning, Limit: 2, EnteredBefore: base.Add(3 * time.Minute)})
	if fmt.Sprint(ids(got)) != "[s-2 s-1 s-0]" {
		t.Fatalf("entered before base+3m: %v, want [s-2 s-1 s-0] (the bound is exclusive)", ids(got))
	}
	if got := listAll(t, s, durable.SagaListParams{EnteredBefore: base}); len(got) != 0 {
		t.Fatalf("entered before the first: %v", ids(got))
	}
}

// testSetResends: the sweep's count of re-sends, kept beside the state,
// changed only as a compare-and-set, and cleared by the next write.
func testSetResends(t *testing.T, s durable.Store) {
	ctx := context.Background()
	set := func(id string, version uint64, from, to int) error {
		return s.SagaSetResends(ctx, &durable.SagaSetResendsParams{SagaID: id, Version: version, From: from, To: to})
	}
	r := rec("s-1", 1, durable.StatusRunning, base, "v1")
	r.Resends = 5 // ignored: a create stores zero
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
		t.Fatal(err)
	}
	r.Resends = 0
	got, _ := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	sameRecord(t, got, r)
	for from := range 2 {
		if err := set("s-1", 1, from, from+1); err != nil {
			t.Fatalf("%d to %d: %v", from, from+1, err)
		}
	}
	r.Resends = 2
	got, _ = s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	sameRecord(t, got, r) // nothing else changed: version, state, times
	// A count that changed since it was read (another sweep) is a conflict,
	// and so is another version; neither changes the count.
	if err := set("s-1", 1, 1, 2); !errors.Is(err, durable.ErrConflict) {
		t.Fatalf("from a stale count: %v, want ErrConflict", err)
	}
	if err := set("s-1", 2, 2, 3); !errors.Is(err, durable.ErrConflict) {
		t.Fatalf("at another version: %v, want ErrConflict", err)
	}
	if err := set("nope", 1, 0, 1); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("a missing saga: %v, want ErrNotFound", err)
	}
	// A count below zero is no count: refused, and nothing changes.
	for _, c := range [][2]int{{2, -1}, {-1, 0}} {
		if err := set("s-1", 1, c[0], c[1]); err == nil || errors.Is(err, durable.ErrConflict) {
			t.Fatalf("from %d to %d: %v, want a plain error", c[0], c[1], err)
		}
	}
	if got, _ := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"}); got.Resends != 2 {
		t.Fatalf("after refused counts: %d, want 2", got.Resends)
	}
	// Giving a claim back.
	if err := set("s-1", 1, 2, 1); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"}); got.Resends != 1 {
		t.Fatalf("after giving one back: %d, want 1", got.Resends)
	}
	// Of concurrent claims from one count, exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = set("s-1", 1, 1, 2) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, durable.ErrConflict):
			t.Fatal(err)
		}
	}
	if won != 1 {
		t.Fatalf("%d concurrent claims from one count won, want 1", won)
	}
	// Progress clears it, whatever the record passed says.
	v2 := rec("s-1", 2, durable.StatusRunning, base.Add(time.Minute), "v2")
	v2.StatusSince, v2.Resends = base, 9
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: v2, ExpectedVersion: 1}); err != nil {
		t.Fatal(err)
	}
	v2.Resends = 0
	got, _ = s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"})
	sameRecord(t, got, v2)
	if err := set("s-1", 2, 0, 1); err != nil {
		t.Fatal(err)
	}
	if got, _ = s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "s-1"}); got.Resends != 1 {
		t.Fatalf("count after progress: %d, want 1", got.Resends)
	}
}

func testDefinitions(t *testing.T, s durable.Store) {
	ctx := context.Background()
	src := []byte("saga: order\nsteps: [{id: a, set: {x: 1}}]\n")
	sum := sha256.Sum256(src) // the engine names a definition by this hash; a store takes any
	p := &durable.DefinitionPutParams{Hash: hex.EncodeToString(sum[:]), Name: "order", Source: src}
	if err := s.DefinitionPut(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.DefinitionPut(ctx, p); err != nil {
		t.Fatalf("putting the same definition again: %v", err)
	}
	other := &durable.DefinitionPutParams{Hash: p.Hash, Name: "order", Source: []byte("tampered")}
	if err := s.DefinitionPut(ctx, other); !errors.Is(err, durable.ErrConflict) {
		t.Fatalf("different source under a stored hash: %v, want ErrConflict", err)
	}
	got, err := s.DefinitionGet(ctx, &durable.DefinitionGetParams{Hash: p.Hash})
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != p.Hash || got.Name != "order" || !bytes.Equal(got.Source, src) {
		t.Fatalf("definition %+v", got)
	}
}

// putDefinition stores src as a definition of name under its SHA-256.
func putDefinition(t *testing.T, s durable.Store, name, src string) *durable.DefinitionPutParams {
	t.Helper()
	sum := sha256.Sum256([]byte(src))
	p := &durable.DefinitionPutParams{Hash: hex.EncodeToString(sum[:]), Name: name, Source: []byte(src)}
	if err := s.DefinitionPut(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// testDefinitionDeploy: a name has no current version until one is
// deployed; a deploy needs the definition stored, under that name; the
// last deploy is current, a repeated one changes nothing, and names are
// independent.
func testDefinitionDeploy(t *testing.T, s durable.Store) {
	ctx := context.Background()
	current := func(name string, consistent bool) (*durable.DefinitionRecord, error) {
		return s.DefinitionCurrent(ctx, &durable.DefinitionCurrentParams{Name: name, Consistent: consistent})
	}
	if _, err := current("order", true); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("current of a name never deployed: %v, want ErrNotFound", err)
	}
	v1 := putDefinition(t, s, "order", "saga: order\nsteps: [{id: a, set: {x: 1}}]\n")
	v2 := putDefinition(t, s, "order", "saga: order\nsteps: [{id: a, set: {x: 2}}]\n")
	other := putDefinition(t, s, "refund", "saga: refund\nsteps: [{id: a, set: {x: 1}}]\n")
	if err := s.DefinitionDeploy(ctx, &durable.DefinitionDeployParams{Name: "order", Hash: "not-stored"}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("deploy of a definition not stored: %v, want ErrNotFound", err)
	}
	if err := s.DefinitionDeploy(ctx, &durable.DefinitionDeployParams{Name: "order", Hash: other.Hash}); !errors.Is(err, durable.ErrConflict) {
		t.Fatalf("deploy of another saga's definition: %v, want ErrConflict", err)
	}
	if _, err := current("order", true); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("current after refused deploys: %v, want ErrNotFound", err)
	}
	want := func(name string, p *durable.DefinitionPutParams) {
		t.Helper()
		got, err := current(name, true)
		if err != nil {
			t.Fatal(err)
		}
		if got.Hash != p.Hash || got.Name != p.Name || !bytes.Equal(got.Source, p.Source) {
			t.Fatalf("current of %s: %+v, want %s", name, got, p.Hash)
		}
	}
	for _, p := range []*durable.DefinitionPutParams{v1, v2, v2} {
		if err := s.DefinitionDeploy(ctx, &durable.DefinitionDeployParams{Name: "order", Hash: p.Hash}); err != nil {
			t.Fatal(err)
		}
		want("order", p)
	}
	if got, err := current("order", false); err != nil || (got.Hash != v1.Hash && got.Hash != v2.Hash) {
		t.Fatalf("current of a deployed name, not consistent: %+v, %v: want a deployed version", got, err)
	}
	if _, err := current("refund", false); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("current of a name stored but never deployed: %v, want ErrNotFound", err)
	}
	if err := s.DefinitionDeploy(ctx, &durable.DefinitionDeployParams{Name: "refund", Hash: other.Hash}); err != nil {
		t.Fatal(err)
	}
	if got, err := current("refund", false); err != nil || got.Hash != other.Hash {
		t.Fatalf("current of a name just deployed, not consistent: %+v, %v", got, err)
	}
	want("order", v2)
}

// testLargeState stores a state near the engine's size limit.
func testLargeState(t *testing.T, s durable.Store) {
	ctx := context.Background()
	big := bytes.Repeat([]byte{0, 1, 2, 255}, durable.MaxRecordStateBytes/4)
	r := durable.SagaRecord{SagaID: "big", Version: 1, Status: durable.StatusRunning, Name: "order", DefinitionHash: "h", CreatedAt: base, StatusSince: base, UpdatedAt: base, State: big}
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "big"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.State, big) {
		t.Fatal("large binary state changed in the store")
	}
}
