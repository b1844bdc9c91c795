package durable_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
)

// The messages of forks travel with their kind and, for a launch, the
// child's index; a step's message keeps its old body byte for byte.
func TestForkMessagesRoundTrip(t *testing.T) {
	t.Parallel()
	for _, m := range []durable.Message{
		{SagaID: "o-1.ship_all.4.12", Version: 7, Queue: durable.QueueAdvance, Kind: durable.KindEnded, Step: "ship_one", Attempt: 1},
		{SagaID: "o-1", Version: 3, Queue: durable.QueueAdvance, Kind: durable.KindJoin, Step: "ship_all", Attempt: 1},
		{SagaID: "o-1.book.2.0", Version: 5, Queue: durable.QueueCompensate, Kind: durable.KindUndo, Step: "book", Attempt: 1},
		{SagaID: "o-1", Version: 3, Queue: durable.QueueAdvance, Kind: durable.KindLaunch, Step: "ship_all", Attempt: 1, Child: 9999},
		{SagaID: "o-1", Version: 9, Queue: durable.QueueAdvance, Kind: durable.KindExpire, Attempt: 1},
		{SagaID: "o-1", Version: 9, Queue: durable.QueueAdvance, Kind: durable.KindExpire, Step: "ship_all", Attempt: 3, Child: 500},
	} {
		body := durable.AppendMessage(nil, m)
		got, err := durable.DecodeMessage(body)
		if err != nil || got != m {
			t.Errorf("%s: %+v %v, want %+v", body, got, err, m)
		}
	}
	step := durable.Message{SagaID: "o-1", Version: 3, Queue: durable.QueueAdvance, Step: "charge", Attempt: 2}
	if got := string(durable.AppendMessage(nil, step)); got != `{"v":1,"saga_id":"o-1","version":3,"queue":"advance","step":"charge","attempt":2}` {
		t.Fatalf("a step's body changed: %s", got)
	}
}

func TestForkMessagesRejected(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"v":1,"saga_id":"s","version":1,"queue":"advance","step":"a","attempt":1,"kind":"fork"}`,
		`{"v":1,"saga_id":"s","version":1,"queue":"advance","step":"a","attempt":1,"kind":"launch","child":-1}`,
		`{"v":1,"saga_id":"s","version":1,"queue":"advance","step":"a","attempt":1,"child":3}`,
		`{"v":1,"saga_id":"s","version":1,"queue":"advance","step":"a","attempt":1,"kind":"ended","child":3}`,
		`{"v":1,"saga_id":"s","version":1,"queue":"advance","step":"a","attempt":1,"kind":"launch","child":10000}`,
	} {
		if _, err := durable.DecodeMessage([]byte(body)); !errors.Is(err, durable.ErrMalformedMessage) {
			t.Errorf("%s: %v, want ErrMalformedMessage", body, err)
		}
	}
}

// A child's id is derived from its parent's, the fork step, the visit and
// its index; past 128 characters it is a hash of them, still valid and
// still distinct per index.
func TestChildID(t *testing.T) {
	t.Parallel()
	if got := durable.ChildID("order-7", "ship_all", 4, 12); got != "order-7.ship_all.4.12" {
		t.Fatalf("ChildID = %q", got)
	}
	long := strings.Repeat("p", 120)
	a, b := durable.ChildID(long, "ship_all", 4, 12), durable.ChildID(long, "ship_all", 4, 13)
	if !durable.ValidSagaID(a) || !durable.ValidSagaID(b) || a == b || !strings.HasSuffix(a, ".12") {
		t.Fatalf("long ids: %q %q", a, b)
	}
	if c := durable.ChildID(long+"q", "ship_all", 4, 12); c == a {
		t.Fatalf("two parents share a child id %q", c)
	}
	// Nesting stays within the limit at any depth.
	id := "o-1"
	for d := range 10 {
		id = durable.ChildID(id, strings.Repeat("s", 64), uint64(1000000+d), 9999)
		if !durable.ValidSagaID(id) {
			t.Fatalf("depth %d: %q", d, id)
		}
	}
}

// A child's id is recognised as one, long or short; ids users pick are
// not, unless they have exactly that form.
func TestIsChildID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		durable.ChildID("order-7", "ship_all", 4, 12):        true,
		durable.ChildID(strings.Repeat("p", 120), "s", 1, 3): true,
		"order-7":        false,
		"order.2026.11":  false,
		"a.b.c":          false,
		"a.step.1":       false,
		"a.9step.1.2":    false,
		"p.book.1.x":     false,
		"a.b.c.step.1.0": true,
	} {
		if got := durable.IsChildID(id); got != want {
			t.Errorf("IsChildID(%q) = %v, want %v", id, got, want)
		}
	}
}
