package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// exerciseLimits holds a store that keeps action limits (durable.Limiter)
// to its contract; a store without it skips the area.
func exerciseLimits(t *testing.T, newStore NewStore) {
	limiter := func(t *testing.T) durable.Limiter {
		l, ok := newStore(t).(durable.Limiter)
		if !ok {
			t.Skip("the store keeps no limits")
		}
		return l
	}
	t.Run("LimitPutListDelete", func(t *testing.T) { testLimitConfig(t, limiter(t)) })
	t.Run("LimitTakeCountsToMax", func(t *testing.T) { testLimitTake(t, limiter(t)) })
	t.Run("LimitTakeConcurrent", func(t *testing.T) { testLimitTakeConcurrent(t, limiter(t)) })
	t.Run("LimitLease", func(t *testing.T) { testLimitLease(t, limiter(t)) })
}

func testLimitConfig(t *testing.T, s durable.Limiter) {
	ctx := context.Background()
	list := func() string {
		t.Helper()
		ls, err := s.LimitList(ctx, &durable.LimitListParams{Consistent: true})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(ls)
	}
	if got := list(); got != "[]" {
		t.Fatalf("limits of an empty store: %s", got)
	}
	for _, l := range []durable.Limit{
		{Action: "pay", Rate: 50, Burst: 5, Concurrency: 3},
		{Action: "lambda:ship-it", Concurrency: 2},
		{Action: "pay", Rate: 10},
	} {
		if err := s.LimitPut(ctx, &durable.LimitPutParams{Limit: l}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := list(), "[{lambda:ship-it 0 0 2} {pay 10 0 0}]"; got != want {
		t.Fatalf("limits: got %s, want %s (by action; a put replaces)", got, want)
	}
	if err := s.LimitDelete(ctx, &durable.LimitDeleteParams{Action: "pay"}); err != nil {
		t.Fatal(err)
	}
	if err := s.LimitDelete(ctx, &durable.LimitDeleteParams{Action: "pay"}); !errors.Is(err, durable.ErrNotFound) {
		t.Fatalf("delete of a limit that is not there: %v, want ErrNotFound", err)
	}
	if got, want := list(), "[{lambda:ship-it 0 0 2}]"; got != want {
		t.Fatalf("limits after delete: got %s, want %s", got, want)
	}
}

func take(s durable.Limiter, action string, window int64, limit int) error {
	return s.LimitTake(context.Background(), &durable.LimitTakeParams{Action: action, Window: window, Max: limit, Expires: base.Add(time.Hour)})
}

func testLimitTake(t *testing.T, s durable.Limiter) {
	for i := range 3 {
		if err := take(s, "pay", 7, 3); err != nil {
			t.Fatalf("take %d of 3: %v", i+1, err)
		}
	}
	if err := take(s, "pay", 7, 3); !errors.Is(err, durable.ErrLimited) {
		t.Fatalf("take 4 of 3: %v, want ErrLimited", err)
	}
	if err := take(s, "ship", 7, 1); err != nil {
		t.Fatalf("another action's window: %v", err)
	}
	if err := take(s, "pay", 8, 3); err != nil {
		t.Fatalf("the next window: %v", err)
	}
}

func testLimitTakeConcurrent(t *testing.T, s durable.Limiter) {
	var took atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			switch err := take(s, "pay", 9, 5); {
			case err == nil:
				took.Add(1)
			case !errors.Is(err, durable.ErrLimited):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if took.Load() != 5 {
		t.Fatalf("20 concurrent takes of a window of 5: %d counted", took.Load())
	}
}

func testLimitLease(t *testing.T, s durable.Limiter) {
	ctx := context.Background()
	lease := func(slot int, holder string, now time.Time) error {
		return s.LimitLease(ctx, &durable.LimitLeaseParams{Action: "pay", Slot: slot, Holder: holder, Now: now, Until: now.Add(time.Minute)})
	}
	release := func(slot int, holder string) {
		t.Helper()
		if err := s.LimitRelease(ctx, &durable.LimitReleaseParams{Action: "pay", Slot: slot, Holder: holder}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lease(0, "a", base); err != nil {
		t.Fatal(err)
	}
	if err := lease(0, "a", base.Add(time.Second)); err != nil {
		t.Fatalf("its holder takes a slot again: %v", err)
	}
	if err := lease(0, "b", base.Add(time.Second)); !errors.Is(err, durable.ErrLimited) {
		t.Fatalf("a held slot: %v, want ErrLimited", err)
	}
	if err := lease(1, "b", base.Add(time.Second)); err != nil {
		t.Fatalf("another slot: %v", err)
	}
	release(0, "b") // not b's: kept
	if err := lease(0, "c", base.Add(2*time.Second)); !errors.Is(err, durable.ErrLimited) {
		t.Fatalf("a slot released by another than its holder: %v, want ErrLimited", err)
	}
	release(0, "a")
	release(0, "a") // twice: nothing
	if err := lease(0, "c", base.Add(2*time.Second)); err != nil {
		t.Fatalf("a released slot: %v", err)
	}
	// c never releases (its worker died): the lease lapses.
	if err := lease(0, "d", base.Add(2*time.Second+time.Minute+time.Millisecond)); err != nil {
		t.Fatalf("a lapsed lease: %v", err)
	}
	release(0, "c") // lapsed and taken: d keeps it
	if err := lease(0, "e", base.Add(3*time.Second+time.Minute)); !errors.Is(err, durable.ErrLimited) {
		t.Fatalf("a slot taken over from a lapsed lease: %v, want ErrLimited", err)
	}
}
