package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// An action ran and returned success, but the worker died before its
// write landed; its message comes again after the saga's deadline. The
// attempt may have taken effect, so it runs again (same idempotency key)
// and its success is recorded; the deadline then compensates it. Firing
// the deadline "before attempt 1" instead would leave the effect neither
// recorded nor compensated (internal/sim checks it: success_compensated,
// effects_equal_committed_steps).
func TestDeadlineAfterACrashedActionWriteCompensatesItsEffect(t *testing.T) {
	t.Parallel()
	def := filepath.Join(t.TempDir(), "d.yaml")
	if err := os.WriteFile(def, []byte(`saga: d
input: {}
timeout: 90s
steps:
  - id: book
    action: svc.book
    compensate: {action: svc.unbook}
  - id: done
    succeed: {}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, def)
	ctx := context.Background()
	crash := &crashStore{Store: r.store.Store}
	r.store.Store = crash
	var booked, unbooked int
	r.reg.Register("svc.book", func(ctx context.Context, c saga.Call) (any, error) {
		booked++
		// The first worker dies after the action, before its write lands.
		crash.on = booked == 1
		return map[string]any{"id": "b-1"}, nil
	})
	r.reg.Register("svc.unbook", func(ctx context.Context, c saga.Call) (any, error) {
		unbooked++
		return nil, nil
	})
	r.start("d-1", map[string]any{})
	d, ok := r.receive()
	if !ok {
		t.Fatal("no first message")
	}
	if _, err := r.coord.Handle(ctx, d.Body); !errors.Is(err, errWorkerDied) {
		t.Fatalf("first handle: %v", err)
	}
	if booked != 1 {
		t.Fatalf("book ran %d times", booked)
	}
	r.clock.Advance(2 * time.Minute) // the message comes again, past the deadline
	r.drain()
	st := r.get("d-1")
	if st.Status != durable.StatusCompensated || unbooked != 1 || booked != 2 || st.Failure == nil || st.Failure.Type != "SagaDeadlineExceeded" {
		t.Fatalf("saga %s (%v): book ran %d times, unbook %d; want it run again past the deadline, then compensated once", st.Status, st.Failure, booked, unbooked)
	}
}

var errWorkerDied = errors.New("the worker died")

// crashStore fails the next write once on is set, as a worker that dies
// before it lands.
type crashStore struct {
	durable.Store
	on bool
}

func (s *crashStore) SagaUpdate(ctx context.Context, p *durable.SagaUpdateParams) error {
	if s.on {
		s.on = false
		return errWorkerDied
	}
	return s.Store.SagaUpdate(ctx, p)
}
