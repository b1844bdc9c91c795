package saga

import (
	"slices"
	"testing"
	"testing/fstest"
)

// The plan's shape is what the fork runtime reads: one flat step array
// (the saga's own steps first, at their old indexes), each step's list,
// branchEnd after a branch's or body's last step, and the fork fields.
func TestForkPlanShape(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"main.yaml": {Data: []byte(`saga: trip
input: {items: list}
steps:
  - id: book
    parallel:
      - steps: [{id: hotel, action: hotels.book, out: hotel}, {id: room, action: rooms.pick}]
      - steps: [{id: flight, action: flights.book}]
    out: booked
  - id: ship_all
    foreach: "${input.items}"
    as: parcel_item
    concurrency: 3
    steps:
      - {id: ship_one, action: shipping.send, with: {sku: "${parcel_item.sku}", n: "${index}"}}
    out: parcels
  - id: pay
    saga: pay.yaml
    with: {amount: 1}
`)},
		"pay.yaml": {Data: []byte("saga: payment\nsteps:\n  - {id: charge, action: payments.charge}\n")},
	}
	p, err := CompileFile(fsys, "main.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(p.steps))
	for i, s := range p.steps {
		ids[i] = s.ID
		if s.idx != i || p.index[s.ID] != i {
			t.Errorf("step %s at %d has idx %d, index %d", s.ID, i, s.idx, p.index[s.ID])
		}
	}
	if want := []string{"book", "ship_all", "pay", "hotel", "room", "flight", "ship_one"}; !slices.Equal(ids, want) {
		t.Fatalf("steps %v, want %v", ids, want)
	}
	at := func(id string) *planStep { return p.steps[p.index[id]] }
	type shape struct{ list, fork, branch, next int }
	for id, want := range map[string]shape{
		"book":     {0, -1, 0, 1},
		"ship_all": {0, -1, 0, 2},
		"pay":      {0, -1, 0, end},
		"hotel":    {1, 0, 0, 4},
		"room":     {1, 0, 0, branchEnd},
		"flight":   {2, 0, 1, branchEnd},
		"ship_one": {3, 1, 0, branchEnd},
	} {
		s := at(id)
		l := p.lists[s.list]
		if got := (shape{s.list, l.fork, l.branch, s.nextIndex}); got != want {
			t.Errorf("%s: list, fork, branch, next = %v, want %v", id, got, want)
		}
	}
	if b := at("book"); !slices.Equal(b.branches, []int{3, 5}) {
		t.Errorf("book's branches start at %v, want [3 5]", b.branches)
	}
	f := at("ship_all")
	if f.body != 6 || f.as != "parcel_item" || f.concurrency != 3 || f.items == nil || f.items.src != "input.items" {
		t.Errorf("ship_all: body %d as %q concurrency %d items %v", f.body, f.as, f.concurrency, f.items)
	}
	if l := p.lists[at("ship_one").list]; !slices.Equal(l.scope, []string{"parcel_item"}) || l.depth != 1 || l.env == p.lists[0].env {
		t.Errorf("the body's scope %v, depth %d", l.scope, l.depth)
	}
	pay := at("pay")
	if pay.child == nil || pay.child.Name() != "payment" || pay.args == nil || pay.args.lit == nil {
		t.Errorf("pay: child %v, args %v", pay.child, pay.args)
	}
	if !p.forks || p.callbacks {
		t.Errorf("forks %v, callbacks %v", p.forks, p.callbacks)
	}
	if st, err := p.DryRun(DryRunParams{Input: map[string]any{"items": []any{}}}); err != nil || st.Status != "succeeded" {
		t.Errorf("a dry run of forks: %v %v", st, err)
	}
	// A definition without forks keeps one list, its indexes, and end.
	q, err := Compile("q.yaml", []byte("saga: q\nsteps:\n  - {id: a, action: w}\n  - {id: b, action: w}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.lists) != 1 || q.steps[0].nextIndex != 1 || q.steps[1].nextIndex != end || q.forks {
		t.Errorf("a plan without forks: lists %v", q.lists)
	}
}
