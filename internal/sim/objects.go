package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/lambdasaga/lambdasaga/durable"
)

// faultyObjects injects faults around the memory object store while
// faults are on: a put that fails (the object may or may not be there:
// here it is not), a get throttled, a get that finds nothing for now.
// Each fault is drawn from the key and how often it was asked, not from
// the world's random source, as the store's reads are: joins read on
// goroutines of their own, and a seed still replays exactly.
type faultyObjects struct {
	durable.Objects
	w *world

	mu    sync.Mutex
	calls map[string]uint64
}

// fault returns the fault, if any, of this call op on key: one of faults,
// each at FaultRate.
func (o *faultyObjects) fault(op, key string, faults ...string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.w.faults {
		return ""
	}
	if o.calls == nil {
		o.calls = map[string]uint64{}
	}
	o.calls[op+key]++
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%s/%d", o.w.cfg.Seed, op, key, o.calls[op+key])
	x := h.Sum64()
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	f := float64(x>>11) / (1 << 53)
	for i, name := range faults {
		if f < o.w.cfg.FaultRate*float64(i+1)/float64(len(faults)) {
			// The report's faults are counted under the store's lock, as
			// its throttled reads are: a join's goroutines meet both.
			o.w.store.mu.Lock()
			o.w.report.Faults[name]++
			o.w.store.mu.Unlock()
			return name
		}
	}
	return ""
}

func (o *faultyObjects) ObjectPut(ctx context.Context, p *durable.ObjectPutParams) error {
	if o.fault("put", p.Key, "object_put_failed") != "" {
		return errors.New("put object: connection reset")
	}
	return o.Objects.ObjectPut(ctx, p)
}

func (o *faultyObjects) ObjectGet(ctx context.Context, p *durable.ObjectGetParams) ([]byte, error) {
	switch o.fault("get", p.Key, "object_get_throttled", "object_get_missing") {
	case "object_get_throttled":
		return nil, fmt.Errorf("get object %s: %w", p.Key, durable.ErrThrottled)
	case "object_get_missing":
		return nil, fmt.Errorf("get object %s: %w", p.Key, durable.ErrNotFound)
	}
	return o.Objects.ObjectGet(ctx, p)
}
