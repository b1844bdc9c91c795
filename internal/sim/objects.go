package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/memobjects"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// faultyObjects injects faults around the memory object store while
// faults are on: a put that fails (the object may or may not be there:
// here it is not), a get throttled, a get that finds nothing for now, and
// a mark of a saga's objects as ended that fails after it marked them (a
// LIST or a COPY cut off, some objects marked: here all of them).
// Each fault is drawn from the key and how often it was asked, not from
// the world's random source, as the store's reads are: joins read on
// goroutines of their own, and a seed still replays exactly.
type faultyObjects struct {
	*memobjects.Objects
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
	err := o.Objects.ObjectPut(ctx, p)
	if err == nil {
		o.w.notePut(p.Key)
	}
	return err
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

func (o *faultyObjects) ObjectsEnd(ctx context.Context, p *durable.ObjectsEndParams) error {
	err := o.Objects.ObjectsEnd(ctx, p)
	if err == nil && o.fault("end", p.SagaID, "objects_end_failed") != "" {
		return errors.New("end objects: connection reset")
	}
	return err
}

// notePut remembers which handle put an object.
func (w *world) notePut(key string) {
	if _, ok := w.putBy[key]; !ok && len(w.bufs) > 0 {
		w.putBy[key] = w.top()
	}
}

// orphaned reports whether the object key was put by a handle that wrote
// no version of its saga: the write that would have referred to it did
// not land (throttled, a crash), and the engine, gone with its handle,
// cannot tell the saga it has objects.
func (w *world) orphaned(key string) bool {
	id, _, _ := strings.Cut(key, "/")
	h, ok := w.putBy[key]
	return ok && !h.wrote[id]
}

// checkObjectsEnded checks that once a tree ended for good, every object
// of its sagas is marked ended (durable.ObjectsEnder), so that it expires
// with the tree; and that the objects of a tree kept (parked) are not.
//
//   - objects_end_with_tree: an object whose saga's root is succeeded or
//     compensated is marked; one whose root is parked is not.
func (w *world) checkObjectsEnded(ctx context.Context) {
	r := w.report
	r.Checks["objects_end_with_tree"] += 0
	r.Violations["objects_end_with_tree"] += 0
	o := w.objects
	if o == nil {
		return
	}
	roots := map[string]*saga.State{} // saga id -> its root
	rootOf := func(id string) (*saga.State, error) {
		if st, ok := roots[id]; ok {
			return st, nil
		}
		st, err := w.coord.Get(ctx, id)
		for depth := 0; err == nil && st.Parent != nil && depth < 16; depth++ {
			st, err = w.coord.Get(ctx, st.Parent.ID)
		}
		if err == nil {
			roots[id] = st
		}
		return st, err
	}
	for _, key := range o.Keys() {
		id, _, _ := strings.Cut(key, "/")
		root, err := rootOf(id)
		r.Checks["objects_end_with_tree"]++
		if err != nil {
			w.violate("objects_end_with_tree", "object %s: its saga's root: %v", key, err)
			continue
		}
		over := root.Status == durable.StatusSucceeded || root.Status == durable.StatusCompensated
		if ended := o.Ended(key) > 0; !ended && over && w.orphaned(key) {
			// Put by a handle whose write did not land (throttled, a
			// crash), and the version written later refers to another
			// value (a service that answered the repeated call
			// differently): no state says the saga has it. Known,
			// documented, counted.
			r.Faults["object_orphaned_by_lost_write"]++
			continue
		}
		if ended := o.Ended(key) > 0; ended != over {
			w.violate("objects_end_with_tree", "object %s: marked ended %v, and its root %s is %s", key, ended, root.SagaID, root.Status)
		}
	}
}
