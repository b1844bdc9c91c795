package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// exerciseExpire holds a store to SagaExpire and ForkExpire: the marks a
// finished tree's items get so that they expire with its root.
func exerciseExpire(t *testing.T, newStore NewStore) {
	t.Run("ExpireKeepsWhatReadsReturn", func(t *testing.T) { testExpireKeeps(t, newStore(t)) })
	t.Run("ExpireCreatesNothing", func(t *testing.T) { testExpireMissing(t, newStore(t)) })
	t.Run("ExpireIsIdempotentAndConcurrent", func(t *testing.T) { testExpireConcurrent(t, newStore(t)) })
}

func testExpireKeeps(t *testing.T, s durable.Store) {
	ctx := context.Background()
	ended := base.Add(time.Hour)
	iter := rec("x-1.each.2.0", 3, durable.StatusSucceeded, base, "i")
	iter.Child, iter.Unlisted = true, true
	child := rec("x-1.pay.3.0", 4, durable.StatusCompensated, base, "c")
	child.Child = true
	for _, r := range []durable.SagaRecord{iter, child} {
		if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
			t.Fatal(err)
		}
	}
	key := durable.ForkKey("x-1", "each", 2)
	count(t, s, durable.ForkCountParams{Key: key, Lane: 0, Count: 0})
	for range 2 {
		for _, r := range []durable.SagaRecord{iter, child} {
			if err := s.SagaExpire(ctx, &durable.SagaExpireParams{SagaID: r.SagaID, EndedAt: ended}); err != nil {
				t.Fatalf("expire saga %s: %v", r.SagaID, err)
			}
		}
		if err := s.ForkExpire(ctx, &durable.ForkExpireParams{Key: key, EndedAt: ended}); err != nil {
			t.Fatalf("expire fork: %v", err)
		}
	}
	for _, want := range []durable.SagaRecord{iter, child} {
		got, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: want.SagaID})
		if err != nil {
			t.Fatal(err)
		}
		sameRecord(t, got, want)
	}
	if got := ids(listAll(t, s, durable.SagaListParams{})); len(got) != 1 || got[0] != child.SagaID {
		t.Fatalf("listed %v after the marks, want only the child saga", got)
	}
	forkStored(t, s, fork(key, []int{1}, nil, -1))
	// The marks change no version: the next write from the stored one wins.
	next := child
	next.Version, next.State = 5, []byte("c2")
	if err := s.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: next, ExpectedVersion: 4}); err != nil {
		t.Fatalf("update after the mark: %v", err)
	}
	count(t, s, durable.ForkCountParams{Key: key, Lane: 0, Count: 1})
	forkStored(t, s, fork(key, []int{2}, nil, -1))
}

func testExpireMissing(t *testing.T, s durable.Store) {
	ctx := context.Background()
	if err := s.SagaExpire(ctx, &durable.SagaExpireParams{SagaID: "y-1.each.1.7", EndedAt: base}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("expire of a missing saga: %v, want ErrNotFound", err)
	}
	if _, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "y-1.each.1.7"}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("the expire of a missing saga created it: %v", err)
	}
	key := durable.ForkKey("y-1", "each", 1)
	if err := s.ForkExpire(ctx, &durable.ForkExpireParams{Key: key, EndedAt: base}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("expire of a missing fork record: %v, want ErrNotFound", err)
	}
	if _, err := s.ForkGet(ctx, &durable.ForkGetParams{Key: key}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("the expire of a missing fork record created it: %v", err)
	}
	// The first count after it creates the record as if nothing were there.
	sameFork(t, "first count", count(t, s, durable.ForkCountParams{Key: key, Lane: 3, Count: 0}), fork(key, []int{0, 0, 0, 1}, nil, -1))
	if err := s.ForkExpire(ctx, &durable.ForkExpireParams{Key: "", EndedAt: base}); err == nil || errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("expire of an empty fork key: %v, want an error that is not ErrNotFound", err)
	}
}

func testExpireConcurrent(t *testing.T, s durable.Store) {
	ctx := context.Background()
	r := rec("z-1.b.1.0", 2, durable.StatusSucceeded, base, "z")
	r.Child, r.Unlisted = true, true
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
		t.Fatal(err)
	}
	key := durable.ForkKey("z-1", "b", 1)
	count(t, s, durable.ForkCountParams{Key: key, Lane: 0, Count: 0})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 8 {
		wg.Go(func() { errs <- s.SagaExpire(ctx, &durable.SagaExpireParams{SagaID: r.SagaID, EndedAt: base}) })
		wg.Go(func() { errs <- s.ForkExpire(ctx, &durable.ForkExpireParams{Key: key, EndedAt: base}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a concurrent mark: %v", err)
		}
	}
	got, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: r.SagaID})
	if err != nil {
		t.Fatal(err)
	}
	sameRecord(t, got, r)
}
