package saga

import (
	"testing"
	"testing/fstest"
)

// What a cursor waits on is named for every kind of cursor, a fork's
// undo of a child included (its step declares no compensate of its own):
// a message that comes for a saga undoing a fork is then refused as not
// the one it waits on, never a panic.
func TestAwaitsNamesAForksUndo(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{"main.yaml": {Data: []byte(`saga: fan
input: {items: list}
steps:
  - id: each
    foreach: "${input.items}"
    steps:
      - {id: ship, action: ship.send, compensate: {action: ship.cancel, timeout: 5s}}
`)}}
	p, err := CompileFile(fsys, "main.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	each, ship := p.index["each"], p.index["ship"]
	if id, timeout := p.Awaits(Cursor{Step: each, Fork: true, Compensating: true, Child: 1}); id != "each" || timeout != 0 {
		t.Errorf("a fork's undo awaits %s, %s; want each, no timeout", id, timeout)
	}
	if id, timeout := p.Awaits(Cursor{Step: ship, Compensating: true}); id != "ship" || timeout.Seconds() != 5 {
		t.Errorf("a compensation awaits %s, %s; want ship, 5s", id, timeout)
	}
}
