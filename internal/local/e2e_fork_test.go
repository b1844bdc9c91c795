package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/chaos"
	"github.com/lambdasaga/lambdasaga/internal/client"
	"github.com/lambdasaga/lambdasaga/internal/local"
	"github.com/lambdasaga/lambdasaga/internal/saga"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// The travel saga's fork steps and their visits (each fork is one visit,
// and the saga has no action before them): the children's ids are
// durable.ChildID(trip, step, visit, index).
const (
	bookVisit    = 1
	payVisit     = 2
	ticketsVisit = 3
)

// TestE2EForks runs the travel saga (examples/travel: hotel, flight and
// car booked in parallel, a payment by a child saga, a ticket per
// traveller in a foreach of concurrency 5) through the real Lambda
// binaries under aws-lambda-rie on the emulators (make e2e). The
// functions are the kill test's (internal/chaos/fn), which run the
// example's actions and record every effect in a ledger table, so that
// effects made in several processes can be put in order.
//
// The saga is started as a service starts it, from its bundle (the parent's
// source with payment.yaml): the functions know the child definition only
// from that bundle in the table, and the launch of the child stores it
// under its own hash for the child's own messages.
//
// Three trips: one that succeeds (7 travellers: the foreach's 5 lanes run
// 2 of them after others); one whose car is sold out (a branch fails: the
// other bookings are cancelled, nothing is paid, no ticket issued); one
// whose third ticket cannot be issued (every ticket issued is voided, the
// payment child saga undone as a whole, newest first, then the bookings).
func TestE2EForks(t *testing.T) {
	if os.Getenv("LAMBDASAGA_E2E") == "" {
		t.Skip("LAMBDASAGA_E2E is not set: run make e2e")
	}
	t.Parallel()
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	sq := awslocal.Endpoint(t, awslocal.EnvSQS)
	dir := t.TempDir()
	rie := filepath.Join(dir, "aws-lambda-rie")
	if err := local.BuildRIE(context.Background(), rie); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	// Building the functions takes minutes on a cold build cache; the
	// test's deadline starts once they run.
	setup := t.Context()
	ledger := &chaos.Ledger{Client: awslocal.DynamoDB(dyn), Table: "e2efork-ledger"}
	if err := ledger.CreateTable(setup); err != nil {
		t.Fatal(err)
	}
	fn := "../chaos/fn"
	env, err := local.Up(setup, local.Config{
		Template: "../../infra/template.yaml", DynamoDBEndpoint: dyn, SQSEndpoint: sq, RIE: rie, BuildDir: dir,
		Mains:   map[string]string{"AdvanceFunction": fn, "CompensateFunction": fn},
		Workers: 2, Visibility: 2 * time.Second, Prefix: "e2efork-", Log: logs,
		ScheduleEvery: time.Second,
		Env:           map[string]string{chaos.EnvLedgerTable: ledger.Table},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Down()
	ctx, cancel := context.WithTimeout(setup, 3*time.Minute)
	defer cancel()
	defer func() {
		if t.Failed() {
			t.Logf("function logs:\n%s", logs.String())
		}
	}()
	c, err := client.NewAWS(client.AWSConfig{AWS: awslocal.Config(), Table: env.Table, AdvanceQueueURL: env.QueueURLs["AdvanceQueue"],
		CompensateQueueURL: env.QueueURLs["CompensateQueue"], DynamoDBEndpoint: dyn, SQSEndpoint: sq})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := saga.CompileFile(os.DirFS("../../examples/travel"), "travel.yaml", saga.Options{})
	if err != nil {
		t.Fatal(err)
	}
	payment, ok := plan.Child("pay")
	if !ok {
		t.Fatal("travel.yaml has no child saga at pay")
	}
	trips := map[string][]string{
		"trip-ok":                      {"ann", "bob", "cy", "dee", "eve", "fay", "gus"},
		"trip-car" + chaos.NoCarSuffix: {"ann", "bob"},
		"trip-noticket":                {"ann", "bob", chaos.NoTicketName, "dee"},
	}
	for id, travellers := range trips {
		names := make([]any, len(travellers))
		for i, n := range travellers {
			names[i] = n
		}
		in := map[string]any{"trip_id": id, "city": "Lisbon", "travellers": names, "amount": 1234.5, "card_token": "tok_1"}
		// The bundle, as a service holding only bytes starts it.
		if _, err := c.Start(ctx, client.StartParams{File: "travel.yaml", Definition: plan.Source(), SagaID: id, Input: in}); err != nil {
			t.Fatal(err)
		}
	}
	final := map[string]*saga.State{}
	for id := range trips {
		final[id] = waitFinal(t, ctx, c, id)
	}
	entries, err := ledger.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	child := func(trip, step string, visit uint64, k int) *saga.State {
		t.Helper()
		st, err := c.Status(ctx, durable.ChildID(trip, step, visit, k))
		if err != nil {
			t.Fatalf("child %d of %s's %s: %v", k, trip, step, err)
		}
		if !st.Status.Final() {
			t.Errorf("child %s is %s after its parent ended %s", st.SagaID, st.Status, final[trip].Status)
		}
		return st
	}
	absent := func(trip, step string, visit uint64) {
		t.Helper()
		if st, err := c.Status(ctx, durable.ChildID(trip, step, visit, 0)); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("%s: fork %s started (child 0: %v, %v) after an earlier fork failed", trip, step, st, err)
		}
	}

	// The trip that goes through.
	id := "trip-ok"
	st := final[id]
	if st.Status != durable.StatusSucceeded {
		t.Fatalf("%s: %s %+v, want succeeded", id, st.Status, st.Failure)
	}
	// Three forks, three joins, each applied once: start (fork book), join
	// book (fork pay), join pay (fork tickets), join tickets (succeed).
	if st.Version != 4 {
		t.Errorf("%s at version %d, want 4: a join applied twice, or a transition lost", id, st.Version)
	}
	out, _ := st.Output.(map[string]any)
	var got []string
	for _, b := range asList(out["bookings"]) {
		got = append(got, fmt.Sprint(asMap(b)["booking"]))
	}
	if want := []string{"hotels-trip-ok", "flights-trip-ok", "cars-trip-ok"}; !slices.Equal(got, want) {
		t.Errorf("%s: bookings %v, want %v (the branches' outputs in branch order)", id, got, want)
	}
	if p := asMap(out["payment"]); p["order_id"] != id || p["amount"] != 1234.5 {
		t.Errorf("%s: payment %v, want the child saga's output", id, out["payment"])
	}
	got = nil
	for _, tk := range asList(out["tickets"]) {
		got = append(got, fmt.Sprint(asMap(tk)["id"]))
	}
	var want []string
	for k := range trips[id] {
		want = append(want, fmt.Sprintf("tk-%s-%d", id, k))
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: tickets %v, want %v (the iterations' outputs in list order)", id, got, want)
	}
	for k := range 3 {
		if ch := child(id, "book", bookVisit, k); ch.Status != durable.StatusSucceeded || ch.Undoing {
			t.Errorf("%s: %s %v (undone %v), want succeeded", id, ch.SagaID, ch.Status, ch.Undoing)
		}
	}
	pay := child(id, "pay", payVisit, 0)
	if pay.Status != durable.StatusSucceeded {
		t.Errorf("%s: %s %v, want succeeded", id, pay.SagaID, pay.Status)
	}
	// The child saga runs its own definition, which the functions read
	// from the table: stored by its launch, under its own hash.
	if pay.DefinitionHash != payment.Hash() || pay.Name != "payment" {
		t.Errorf("%s: runs %s (%s), want payment (%s)", pay.SagaID, pay.Name, pay.DefinitionHash, payment.Hash())
	}
	store, err := dynamo.New(dynamo.Config{Client: awslocal.DynamoDB(dyn), Table: env.Table})
	if err != nil {
		t.Fatal(err)
	}
	if def, err := store.DefinitionGet(ctx, &durable.DefinitionGetParams{Hash: payment.Hash()}); err != nil || string(def.Source) != string(payment.Source()) {
		t.Errorf("the payment definition under its hash: %v; want stored by the launch", err)
	}
	for k := range trips[id] {
		if ch := child(id, "tickets", ticketsVisit, k); ch.Status != durable.StatusSucceeded {
			t.Errorf("%s: %s %v, want succeeded", id, ch.SagaID, ch.Status)
		}
	}
	effects := effectsOf(entries, id)
	if undos := effects.phase("undo"); len(undos) != 0 {
		t.Errorf("%s: compensations %v, want none", id, undos)
	}
	book := []string{"cars.book " + id, "flights.book " + id, "hotels.book " + id}
	if got := effects.sorted("do", ".book "); !slices.Equal(got, book) {
		t.Errorf("%s: bookings %v, want %v", id, got, book)
	}
	var tickets []string
	for k, name := range trips[id] {
		tickets = append(tickets, fmt.Sprintf("tickets.issue %s %d %s", id, k, name))
	}
	sort.Strings(tickets)
	if got := effects.sorted("do", "tickets.issue "); !slices.Equal(got, tickets) {
		t.Errorf("%s: tickets %v, want %v", id, got, tickets)
	}
	// The forks run one after the other: every booking, then authorize,
	// then capture, then every ticket.
	auth, capture := effects.at("do", "payments.authorize "+id), effects.at("do", "payments.capture "+id)
	if !(effects.last("do", ".book ") < auth && auth < capture && capture < effects.first("do", "tickets.issue ")) {
		t.Errorf("%s: effects out of order: %v", id, effects.notes())
	}
	for _, e := range effects {
		if e.Calls != 1 {
			t.Logf("%s: %s called %d times (one effect, by its idempotency key)", e.Saga, e.Note, e.Calls)
		}
	}

	// The car is sold out: the hotel and the flight, booked meanwhile (or
	// cancelled while booking), are cancelled; nothing is paid.
	id = "trip-car" + chaos.NoCarSuffix
	st = final[id]
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Step != "car" || st.Failure.Type != "SoldOut" {
		t.Fatalf("%s: %s %+v, want compensated, car SoldOut", id, st.Status, st.Failure)
	}
	car := child(id, "book", bookVisit, 2)
	if car.Status != durable.StatusCompensated || car.Undoing || car.Failure == nil || car.Failure.Type != "SoldOut" {
		t.Errorf("%s: %s %v (undone %v, %+v), want compensated by its own failure", id, car.SagaID, car.Status, car.Undoing, car.Failure)
	}
	undone := checkUndone(t, id, effectsOf(entries, id), []*saga.State{child(id, "book", bookVisit, 1), child(id, "book", bookVisit, 0)})
	// Start (fork), join (the fork failed), one transition per child undone.
	if want := uint64(2 + len(undone)); st.Version != want {
		t.Errorf("%s at version %d, want %d (%d children undone)", id, st.Version, want, len(undone))
	}
	absent(id, "pay", payVisit)
	absent(id, "tickets", ticketsVisit)

	// A ticket cannot be issued: the tickets issued are voided, the
	// payment undone as a whole (refund, then void), the bookings
	// cancelled, car, flight, hotel: the reverse of their order.
	id = "trip-noticket"
	st = final[id]
	if st.Status != durable.StatusCompensated || st.Failure == nil || st.Failure.Step != "ticket" {
		t.Fatalf("%s: %s %+v, want compensated, ticket failed", id, st.Status, st.Failure)
	}
	if ch := child(id, "tickets", ticketsVisit, 2); ch.Status != durable.StatusCompensated || ch.Undoing {
		t.Errorf("%s: %s %v (undone %v), want compensated by its own failure", id, ch.SagaID, ch.Status, ch.Undoing)
	}
	var children []*saga.State
	for _, k := range []int{3, 1, 0} {
		children = append(children, child(id, "tickets", ticketsVisit, k))
	}
	children = append(children, child(id, "pay", payVisit, 0))
	for _, k := range []int{2, 1, 0} {
		children = append(children, child(id, "book", bookVisit, k))
	}
	undone = checkUndone(t, id, effectsOf(entries, id), children)
	if want := uint64(4 + len(undone)); st.Version != want {
		t.Errorf("%s at version %d, want %d (%d children undone)", id, st.Version, want, len(undone))
	}
	if n := len(undone); n < 4 {
		t.Errorf("%s: %d children undone by the parent, want at least the payment and the 3 bookings", id, n)
	}
}

// checkUndone checks the compensations of a compensated trip whose
// children are listed: every effect done in a child is undone exactly
// once, after it; a child that compensated itself (it failed, or was
// cancelled) did so before the parent undid any child; the children the
// parent undid were undone one after the other, the latest fork first and
// the highest index first in a fork (children lists them in that order),
// each child's compensations newest first. It returns the children the
// parent undid.
func checkUndone(t *testing.T, trip string, effects tripEffects, children []*saga.State) []*saga.State {
	t.Helper()
	var undone []*saga.State
	lastSelf, prev := int64(0), int64(0)
	for _, ch := range children {
		if ch.Status != durable.StatusCompensated {
			t.Errorf("%s: %s ended %s, want compensated", trip, ch.SagaID, ch.Status)
			continue
		}
		dos, undos := effects.of(ch.SagaID, "do"), effects.of(ch.SagaID, "undo")
		if len(undos) != len(dos) {
			t.Errorf("%s: %s did %v and undid %v: each effect undone exactly once", trip, ch.SagaID, notes(dos), notes(undos))
			continue
		}
		for i, d := range dos {
			u := undos[len(undos)-1-i]
			if u.Step != d.Step || u.Seq < d.Seq {
				t.Errorf("%s: %s did %v and undid %v: want the reverse, each after its effect", trip, ch.SagaID, notes(dos), notes(undos))
			}
		}
		if !ch.Undoing {
			if len(undos) > 0 {
				lastSelf = max(lastSelf, undos[len(undos)-1].Seq)
			}
			continue
		}
		undone = append(undone, ch)
		// Undone by the parent: after the child undone before it.
		if len(undos) > 0 {
			if undos[0].Seq < prev {
				t.Errorf("%s: %s undone (from %d) before the child undone before it had ended (%d): %v", trip, ch.SagaID, undos[0].Seq, prev, effects.notes())
			}
			prev = undos[len(undos)-1].Seq
		}
	}
	if first := firstUndo(effects, undone); first > 0 && lastSelf > first {
		t.Errorf("%s: a child compensated itself (to %d) after the parent began undoing its children (%d): %v", trip, lastSelf, first, effects.notes())
	}
	return undone
}

func firstUndo(effects tripEffects, undone []*saga.State) int64 {
	for _, ch := range undone {
		if us := effects.of(ch.SagaID, "undo"); len(us) > 0 {
			return us[0].Seq
		}
	}
	return 0
}

// tripEffects are the ledger's entries of a trip and its children, by
// sequence.
type tripEffects []chaos.Entry

func effectsOf(entries map[string][]chaos.Entry, trip string) tripEffects {
	var es tripEffects
	for saga, list := range entries {
		if saga == trip || strings.HasPrefix(saga, trip+".") {
			es = append(es, list...)
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
	return es
}

func (es tripEffects) phase(p string) []string {
	var out []string
	for _, e := range es {
		if e.Phase == p {
			out = append(out, e.Note)
		}
	}
	return out
}

// of is one saga's entries of a phase, oldest first.
func (es tripEffects) of(sagaID, phase string) []chaos.Entry {
	var out []chaos.Entry
	for _, e := range es {
		if e.Saga == sagaID && e.Phase == phase {
			out = append(out, e)
		}
	}
	return out
}

// sorted is the notes of a phase holding sub, sorted.
func (es tripEffects) sorted(phase, sub string) []string {
	var out []string
	for _, e := range es {
		if e.Phase == phase && strings.Contains(e.Note, sub) {
			out = append(out, e.Note)
		}
	}
	sort.Strings(out)
	return out
}

// at is the sequence number of the effect with note; -1: none.
func (es tripEffects) at(phase, note string) int64 {
	for _, e := range es {
		if e.Phase == phase && e.Note == note {
			return e.Seq
		}
	}
	return -1
}

func (es tripEffects) first(phase, sub string) int64 {
	for _, e := range es {
		if e.Phase == phase && strings.Contains(e.Note, sub) {
			return e.Seq
		}
	}
	return -1
}

func (es tripEffects) last(phase, sub string) int64 {
	n := int64(-1)
	for _, e := range es {
		if e.Phase == phase && strings.Contains(e.Note, sub) {
			n = e.Seq
		}
	}
	return n
}

func (es tripEffects) notes() []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%d %s %s (%s)", e.Seq, e.Phase, e.Note, e.Saga)
	}
	return out
}

func notes(es []chaos.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Note
	}
	return out
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
