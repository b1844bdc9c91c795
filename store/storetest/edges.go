package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

// exerciseEdges holds cases at the edges where a review found the memory
// store and DynamoDB disagreeing: bounds past 2262, times before 1970, a
// status that does not exist.
func exerciseEdges(t *testing.T, newStore NewStore) {
	t.Run("SagaListFarFutureBound", func(t *testing.T) { testEnteredBeforeFarFuture(t, newStore(t)) })
	t.Run("TimesBefore1970", func(t *testing.T) { testTimesBefore1970(t, newStore(t)) })
	t.Run("SagaListUnknownStatus", func(t *testing.T) { testUnknownStatus(t, newStore(t)) })
}

// A caller that wants every saga "entered before" a far bound (a natural
// sentinel: the year 9999) gets all of them, past 2262 too, where
// time.UnixNano overflows.
func testEnteredBeforeFarFuture(t *testing.T, s durable.Store) {
	ctx := context.Background()
	for i := range 3 {
		if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: rec(fmt.Sprintf("s-%d", i), 1, durable.StatusRunning, base.Add(time.Duration(i)*time.Minute), "x")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, year := range []int{2300, 9999} {
		bound := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)
		if got := listAll(t, s, durable.SagaListParams{Status: durable.StatusRunning, EnteredBefore: bound}); len(got) != 3 {
			t.Errorf("entered before %d: %v, want all 3 sagas (entered in 2026)", year, ids(got))
		}
	}
}

// A saga's times before 1970 (a test clock, a restored record) read back
// as given, and list in their place.
func testTimesBefore1970(t *testing.T, s durable.Store) {
	ctx := context.Background()
	old := time.Date(1960, 5, 1, 0, 0, 0, 0, time.UTC)
	r := rec("old", 1, durable.StatusRunning, old, "x")
	r.CreatedAt = old
	if err := s.SagaCreate(ctx, &durable.SagaCreateParams{Record: r}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SagaGet(ctx, &durable.SagaGetParams{SagaID: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if !got.StatusSince.Equal(old) || !got.CreatedAt.Equal(old) || !got.UpdatedAt.Equal(old) {
		t.Errorf("times before 1970 read back as StatusSince %s, CreatedAt %s, UpdatedAt %s; want %s", got.StatusSince, got.CreatedAt, got.UpdatedAt, old)
	}
	// Both stores must agree on what entered before 1965.
	if got := listAll(t, s, durable.SagaListParams{EnteredBefore: time.Date(1965, 1, 1, 0, 0, 0, 0, time.UTC)}); len(got) != 1 {
		t.Errorf("entered before 1965: %v, want [old]", ids(got))
	}
}

// A status that does not exist is an error, not an empty listing.
func testUnknownStatus(t *testing.T, s durable.Store) {
	if _, err := s.SagaList(context.Background(), &durable.SagaListParams{Status: "runing"}); err == nil {
		t.Error("listing status \"runing\" gave no error")
	}
}
