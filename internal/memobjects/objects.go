// Package memobjects is durable.Objects in memory: for embedded runs,
// sagactl run without an S3 endpoint, and tests. It counts the requests it
// serves, as S3 would bill them.
package memobjects

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/lambdasaga/lambdasaga/durable"
)

var _ durable.Objects = (*Objects)(nil)

// Objects keeps objects in a map. The zero value is not usable: call New.
type Objects struct {
	mu     sync.Mutex
	bodies map[string][]byte
	stats  Stats
}

// Stats counts what an Objects served.
type Stats struct {
	Puts, Gets int   // requests, each as S3 bills one (a get of a missing key too)
	PutBytes   int64 // bytes put, repeats included
	Objects    int   // objects held
	Bytes      int64 // bytes held
}

// New returns an empty Objects.
func New() *Objects { return &Objects{bodies: map[string][]byte{}} }

// ObjectPut keeps a copy of p.Body under p.Key.
func (o *Objects) ObjectPut(ctx context.Context, p *durable.ObjectPutParams) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(p.Body) > durable.MaxObjectBytes {
		return fmt.Errorf("object %s: %d bytes, over %d", p.Key, len(p.Body), durable.MaxObjectBytes)
	}
	b := append(make([]byte, 0, len(p.Body)), p.Body...)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stats.Puts++
	o.stats.PutBytes += int64(len(b))
	if old, ok := o.bodies[p.Key]; ok {
		o.stats.Bytes -= int64(len(old))
	} else {
		o.stats.Objects++
	}
	o.stats.Bytes += int64(len(b))
	o.bodies[p.Key] = b
	return nil
}

// ObjectGet returns the body under p.Key, durable.ErrNotFound if none.
func (o *Objects) ObjectGet(ctx context.Context, p *durable.ObjectGetParams) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stats.Gets++
	b, ok := o.bodies[p.Key]
	if !ok {
		return nil, fmt.Errorf("object %s: %w", p.Key, durable.ErrNotFound)
	}
	return b, nil
}

// Stats returns what o has served so far.
func (o *Objects) Stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stats
}

// Keys lists the keys of the objects held, sorted.
func (o *Objects) Keys() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.bodies))
}

// Delete removes the object under key, as an expiry would: for tests of a
// reference whose object is gone.
func (o *Objects) Delete(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b, ok := o.bodies[key]; ok {
		o.stats.Objects--
		o.stats.Bytes -= int64(len(b))
		delete(o.bodies, key)
	}
}
