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
	t.Run("SagaList", func(t *testing.T) { testList(t, newStore(t)) })
	t.Run("Definitions", func(t *testing.T) { testDefinitions(t, newStore(t)) })
	t.Run("LargeState", func(t *testing.T) { testLargeState(t, newStore(t)) })
}

var base = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func rec(id string, version uint64, status durable.Status, at time.Time, state string) durable.SagaRecord {
	return durable.SagaRecord{SagaID: id, Version: version, Status: status, Name: "order", DefinitionHash: "h1", UpdatedAt: at, State: []byte(state)}
}

func sameRecord(t *testing.T, got *durable.SagaRecord, want durable.SagaRecord) {
	t.Helper()
	if got.SagaID != want.SagaID || got.Version != want.Version || got.Status != want.Status || got.Name != want.Name ||
		got.DefinitionHash != want.DefinitionHash || !got.UpdatedAt.Equal(want.UpdatedAt) || !bytes.Equal(got.State, want.State) {
		t.Fatalf("record:\n got %+v\nwant %+v", *got, want)
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
	// Move s-00 to the front by updating it last.
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: rec("s-00", 2, durable.StatusSucceeded, base.Add(time.Hour), "y"), ExpectedVersion: 1}); err != nil {
		t.Fatal(err)
	}
	var all []durable.SagaSummary
	cursor := ""
	pages := 0
	for {
		res, err := s.SagaList(ctx, &durable.SagaListParams{Limit: 10, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Sagas) > 10 {
			t.Fatalf("page of %d, limit 10", len(res.Sagas))
		}
		all = append(all, res.Sagas...)
		pages++
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
		if pages > 10 {
			t.Fatal("listing does not end")
		}
	}
	if len(all) != 25 {
		t.Fatalf("listed %d sagas, want 25", len(all))
	}
	if all[0].SagaID != "s-00" || all[0].Status != durable.StatusSucceeded || all[0].Version != 2 || all[1].SagaID != "s-24" || all[24].SagaID != "s-01" {
		t.Fatalf("order: first %s %s v%d, second %s, last %s", all[0].SagaID, all[0].Status, all[0].Version, all[1].SagaID, all[24].SagaID)
	}
	res, err := s.SagaList(ctx, &durable.SagaListParams{Status: durable.StatusCompensated, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sagas) != 8 || res.NextCursor != "" {
		t.Fatalf("compensated: %d sagas, cursor %q; want 8 and none", len(res.Sagas), res.NextCursor)
	}
	for i, sm := range res.Sagas {
		if sm.Status != durable.StatusCompensated {
			t.Fatalf("listed a %s saga under compensated", sm.Status)
		}
		if i > 0 && sm.UpdatedAt.After(res.Sagas[i-1].UpdatedAt) {
			t.Fatal("not newest first")
		}
	}
	res, err = s.SagaList(ctx, &durable.SagaListParams{Status: durable.StatusWaiting})
	if err != nil || len(res.Sagas) != 0 {
		t.Fatalf("waiting: %v %v", res, err)
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

// testLargeState stores a state near the engine's size limit.
func testLargeState(t *testing.T, s durable.Store) {
	ctx := context.Background()
	big := bytes.Repeat([]byte{0, 1, 2, 255}, durable.MaxRecordStateBytes/4)
	r := durable.SagaRecord{SagaID: "big", Version: 1, Status: durable.StatusRunning, Name: "order", DefinitionHash: "h", UpdatedAt: base, State: big}
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
