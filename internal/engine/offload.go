package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// Large values by reference (saga/offload.go): with an object store
// (CoordinatorConfig.Objects), every state the coordinator reads has its
// references replaced by their values before the pure core runs
// (hydrate), and every state it writes keeps each value over
// OffloadBytes as an object, put before the conditional write that refers
// to it (record): a crash between them leaves an object nothing refers
// to, expiring with the saga, never a reference to nothing.
//
// Objects are content-addressed, so a value never changes under its key:
// a process keeps the values it read or put in a cache by hash, and by
// identity (the same map, list or string in memory), so that a chain of
// steps passing a large value on reads it once, and writes each version
// without encoding, hashing or putting it again.

// DefaultOffloadBytes is the size over which a value is kept as an
// object when CoordinatorConfig.Objects is set: the break-even at list
// prices, under which one S3 PUT and a cold GET cost more than the write
// and read units the value adds to a single write and read of the saga's
// item (8.4 KB; a value kept across more versions breaks even lower).
// docs/COST.md, "Large values", gives the rule and the latency it trades.
const DefaultOffloadBytes = 8 << 10

// DefaultValueCacheBytes bounds the values a coordinator keeps in memory
// by hash (CoordinatorConfig.ValueCacheBytes).
const DefaultValueCacheBytes = 256 << 20

// ErrNoObjects: a saga's state refers to values kept as objects, and the
// coordinator has no object store (CoordinatorConfig.Objects) to read
// them from.
var ErrNoObjects = errors.New("the saga holds values kept as objects, and this coordinator has no object store (configure the same one that wrote them)")

// ErrValueMissing: a value a saga's state refers to is not in the object
// store (expired, or deleted). Deliberately not durable.ErrNotFound,
// which callers take for a saga that does not exist: a join would count
// a child whose value is missing as never launched, and not undo it.
var ErrValueMissing = errors.New("a value the saga refers to is missing from the object store")

// offloadBytes is the threshold the core measures states with: 0 without
// an object store.
func (c *Coordinator) offloadBytes() int {
	if c.cfg.Objects == nil {
		return 0
	}
	return c.cfg.OffloadBytes
}

// hydrate replaces the references in st, a state just read that holds
// some (saga.State.UnmarshalBinaryRefs), with their values. Without an
// object store, such a state is an error: the core would see references
// where it expects values.
func (c *Coordinator) hydrate(ctx context.Context, st *saga.State, refs bool) error {
	if !refs {
		return nil
	}
	if c.cfg.Objects == nil {
		return fmt.Errorf("saga %s: %w", st.SagaID, ErrNoObjects)
	}
	return st.Hydrate(func(r saga.Ref) (any, error) { return c.value(ctx, st.SagaID, r) })
}

// value returns the value r refers to in saga id's state, from the cache
// or from the object store.
func (c *Coordinator) value(ctx context.Context, id string, r saga.Ref) (any, error) {
	if v, ok := c.values.get(r, id); ok {
		return v, nil
	}
	key := r.Key(id)
	body, err := c.cfg.Objects.ObjectGet(ctx, &durable.ObjectGetParams{Key: key})
	if errors.Is(err, durable.ErrNotFound) {
		return nil, fmt.Errorf("saga %s: value %s: %w", id, key, ErrValueMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("saga %s: value %s: %w", id, key, err)
	}
	if err := r.CheckBody(body); err != nil {
		return nil, fmt.Errorf("saga %s: value %s: %w: %v", id, key, ErrDamagedState, err)
	}
	v, err := saga.DecodeValue(body)
	if err != nil {
		return nil, fmt.Errorf("saga %s: value %s: %w: %v", id, key, ErrDamagedState, err)
	}
	c.values.add(r, v, id)
	return v, nil
}

// record encodes st for a write into buf: with an object store, each value
// over the threshold as a reference, its object put first.
func (c *Coordinator) record(ctx context.Context, st *saga.State, buf []byte) (durable.SagaRecord, error) {
	if c.cfg.Objects == nil {
		return st.Record(buf)
	}
	off := saga.Offload{Bytes: c.cfg.OffloadBytes, Known: func(v any) (saga.Ref, bool) { return c.values.known(v, st.SagaID) }}
	if plan, err := c.cfg.Plans.Get(ctx, st.DefinitionHash); err == nil {
		off.KeepInput = plan.Secrets()
	} else if len(st.Input) > 0 {
		// Without its plan the secrets are unknown: keep the input inline.
		off.KeepInput = slices.Collect(mapKeys(st.Input))
	}
	rec, err := st.RecordOffload(buf, &off)
	if err != nil {
		return rec, err
	}
	if off.Refs > 0 {
		st.Objects = true // as the encoding says: the state in memory is the one read back
	}
	for _, o := range off.Objects {
		if c.values.stored(o.Ref, st.SagaID) {
			continue // the same content, put under this saga's key before
		}
		key := o.Ref.Key(st.SagaID)
		if err := c.cfg.Objects.ObjectPut(ctx, &durable.ObjectPutParams{Key: key, Body: o.Body}); err != nil {
			return durable.SagaRecord{}, fmt.Errorf("saga %s: put value %s: %w", st.SagaID, key, err)
		}
		c.values.add(o.Ref, o.Value, st.SagaID)
	}
	return rec, nil
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// valueCache holds values kept as objects, by hash and by identity, each
// with the sagas under whose keys its object is known to exist. It evicts
// the oldest past its bound. A value in it stays alive, so its identity
// (an address) cannot be taken by another value while it is cached.
type valueCache struct {
	mu     sync.Mutex
	max    int64
	bytes  int64
	byHash map[[32]byte]*cachedValue
	byID   map[identity]*cachedValue
	order  [][32]byte // oldest first
}

type cachedValue struct {
	ref  saga.Ref
	v    any
	id   identity
	keys []string // saga ids whose key for it exists; the latest few
}

// maxKeysPerValue bounds the saga ids remembered per value: a value
// passed to many children is put under each.
const maxKeysPerValue = 8

// identity is where a map, list, string or byte slice lives in memory.
type identity struct {
	p unsafe.Pointer
	n int
}

func identityOf(v any) (identity, bool) {
	switch t := v.(type) {
	case map[string]any:
		if t != nil {
			return identity{reflect.ValueOf(t).UnsafePointer(), -1}, true
		}
	case []any:
		if len(t) > 0 {
			return identity{unsafe.Pointer(&t[0]), len(t)}, true
		}
	case string:
		if len(t) > 0 {
			return identity{unsafe.Pointer(unsafe.StringData(t)), len(t)}, true
		}
	case []byte:
		if len(t) > 0 {
			return identity{unsafe.Pointer(&t[0]), -len(t) - 2}, true
		}
	}
	return identity{}, false
}

func (vc *valueCache) get(r saga.Ref, sagaID string) (any, bool) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	e, ok := vc.byHash[r.Hash]
	if !ok {
		return nil, false
	}
	e.addKey(sagaID) // its state refers to it: its object exists
	return e.v, true
}

// stored reports whether r's object is known to exist under saga
// sagaID's key.
func (vc *valueCache) stored(r saga.Ref, sagaID string) bool {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	e, ok := vc.byHash[r.Hash]
	return ok && slices.Contains(e.keys, sagaID)
}

// known returns the reference of v if it is cached and its object exists
// under saga sagaID's key.
func (vc *valueCache) known(v any, sagaID string) (saga.Ref, bool) {
	id, ok := identityOf(v)
	if !ok {
		return saga.Ref{}, false
	}
	vc.mu.Lock()
	defer vc.mu.Unlock()
	e, ok := vc.byID[id]
	if !ok || !slices.Contains(e.keys, sagaID) {
		return saga.Ref{}, false
	}
	return e.ref, true
}

func (vc *valueCache) add(r saga.Ref, v any, sagaID string) {
	if vc.max < 0 {
		return // no cache
	}
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if vc.byHash == nil {
		vc.byHash, vc.byID = map[[32]byte]*cachedValue{}, map[identity]*cachedValue{}
	}
	if e, ok := vc.byHash[r.Hash]; ok {
		e.addKey(sagaID)
		return
	}
	e := &cachedValue{ref: r, v: v, keys: []string{sagaID}}
	if id, ok := identityOf(v); ok {
		if _, taken := vc.byID[id]; !taken {
			e.id = id
			vc.byID[id] = e
		}
	}
	vc.byHash[r.Hash] = e
	vc.order = append(vc.order, r.Hash)
	vc.bytes += int64(r.Size)
	for vc.bytes > vc.max && len(vc.order) > 1 {
		old := vc.byHash[vc.order[0]]
		vc.order = vc.order[1:]
		delete(vc.byHash, old.ref.Hash)
		if old.id.p != nil && vc.byID[old.id] == old {
			delete(vc.byID, old.id)
		}
		vc.bytes -= int64(old.ref.Size)
	}
}

func (e *cachedValue) addKey(sagaID string) {
	if slices.Contains(e.keys, sagaID) {
		return
	}
	if len(e.keys) == maxKeysPerValue {
		e.keys = slices.Delete(e.keys, 0, 1)
	}
	e.keys = append(e.keys, sagaID)
}
