package travel_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/examples/travel"
	"github.com/lambdasaga/lambdasaga/internal/embedded"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

func compile(t *testing.T) *saga.Plan {
	t.Helper()
	fsys := fstest.MapFS{"travel.yaml": {Data: travel.Definition}, "payment.yaml": {Data: travel.Payment}}
	plan, err := saga.CompileFile(fsys, "travel.yaml", saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func trip(id string, travellers ...string) map[string]any {
	names := make([]any, len(travellers))
	for i, n := range travellers {
		names[i] = n
	}
	return map[string]any{"trip_id": id, "city": "Lisbon", "travellers": names, "amount": 1234.5, "card_token": "tok_1"}
}

func run(t *testing.T, svc *travel.Services, id string, in map[string]any) *saga.State {
	t.Helper()
	actions := engine.NewRegistry()
	svc.Register(actions)
	rt, err := embedded.Start(embedded.Config{Actions: actions, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := rt.Run(ctx, &engine.StartParams{Plan: compile(t), SagaID: id, Input: in})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The hotel, the flight and the car are booked, the trip paid by the
// child saga, and a ticket issued per traveller.
func TestTravelBooksInParallel(t *testing.T) {
	svc := travel.NewServices()
	st := run(t, svc, "t-1", trip("t-1", "ann", "bob", "cy"))
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("%s: %+v", st.Status, st.Failure)
	}
	out := st.Output.(map[string]any)
	bookings := out["bookings"].([]any)
	if len(bookings) != 3 || bookings[0].(map[string]any)["booking"] != "hotels-t-1" || bookings[2].(map[string]any)["booking"] != "cars-t-1" {
		t.Fatalf("bookings %v", bookings)
	}
	if p := out["payment"].(map[string]any); p["order_id"] != "t-1" || p["amount"] != 1234.5 {
		t.Fatalf("payment %v", p)
	}
	tickets := out["tickets"].([]any)
	if len(tickets) != 3 || tickets[1].(map[string]any)["id"] != "tk-t-1-1" {
		t.Fatalf("tickets %v", tickets)
	}
	eff := svc.EffectsNow()
	for _, want := range []string{"book hotels t-1", "book flights t-1", "book cars t-1", "authorize t-1 1234.50", "capture t-1 1234.50", "issue tk-t-1-0 ann", "issue tk-t-1-2 cy"} {
		if !slices.Contains(eff, want) {
			t.Errorf("no %q in %v", want, eff)
		}
	}
	if len(eff) != 8 {
		t.Errorf("effects %v", eff)
	}
}

// No car: the hotel and the flight, booked meanwhile, are cancelled, and
// nothing is paid.
func TestTravelUndoesTheBookingsWhenOneFails(t *testing.T) {
	svc := travel.NewServices()
	svc.SoldOut["cars"] = true
	st := run(t, svc, "t-2", trip("t-2", "ann"))
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Step != "car" {
		t.Fatalf("%s: %+v", st.Status, st.Failure)
	}
	eff := svc.EffectsNow()
	for _, e := range eff {
		if strings.HasPrefix(e, "authorize") || strings.HasPrefix(e, "issue") {
			t.Errorf("ran %q after the fork failed", e)
		}
	}
	for _, svcName := range []string{"hotels", "flights"} {
		booked, cancelled := slices.Index(eff, "book "+svcName+" t-2"), slices.Index(eff, "cancel "+svcName+" t-2")
		if booked >= 0 && cancelled < booked {
			t.Errorf("%s booked and not cancelled after: %v", svcName, eff)
		}
	}
}

// A ticket that cannot be issued, after the bookings and the payment:
// the tickets issued are voided, the payment (a child saga that
// succeeded) is undone as a whole, newest first (refund, then void), and
// then the bookings are cancelled.
func TestTravelUndoesEverythingWhenATicketFails(t *testing.T) {
	svc := travel.NewServices()
	svc.NoTicket["cy"] = true
	st := run(t, svc, "t-3", trip("t-3", "ann", "bob", "cy", "dee"))
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Step != "ticket" {
		t.Fatalf("%s: %+v", st.Status, st.Failure)
	}
	eff := svc.EffectsNow()
	at := func(e string) int {
		i := slices.Index(eff, e)
		if i < 0 {
			t.Fatalf("no %q in %v", e, eff)
		}
		return i
	}
	// Every ticket issued is voided, before the payment is undone.
	for _, e := range eff {
		if id, ok := strings.CutPrefix(e, "issue "); ok {
			id, _, _ = strings.Cut(id, " ")
			if at("void "+id) > at("refund t-3 1234.50") {
				t.Errorf("ticket %s voided after the refund: %v", id, eff)
			}
		}
	}
	if !(at("refund t-3 1234.50") < at("void t-3") && at("void t-3") < at("cancel hotels t-3") && at("void t-3") < at("cancel cars t-3")) {
		t.Errorf("undone out of order: %v", eff)
	}
	if slices.Contains(eff, "issue tk-t-3-2 cy") {
		t.Errorf("cy's ticket was issued: %v", eff)
	}
}
