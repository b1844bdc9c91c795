// Package memobjects is durable.Objects in memory: for embedded runs,
// sagactl run without an S3 endpoint, and tests. It counts the requests it
// serves, as S3 would bill them.
package memobjects

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/lambdasaga/lambdasaga/durable"
)

var (
	_ durable.Objects      = (*Objects)(nil)
	_ durable.ObjectsEnder = (*Objects)(nil)
)

// Objects keeps objects in a map. The zero value is not usable: call New.
type Objects struct {
	mu     sync.Mutex
	bodies map[string][]byte
	ended  map[string]int // key: how many times it was marked ended
	stats  Stats
}

// Stats counts what an Objects served.
type Stats struct {
	Puts, Gets int // requests, each as S3 bills one (a get of a missing key too)
	// Lists and Copies are the requests ObjectsEnd makes as S3 would: a
	// LIST per page of a saga's keys (1,000 a page), a COPY per object.
	Lists, Copies int
	PutBytes      int64 // bytes put, repeats included
	Objects       int   // objects held
	Bytes         int64 // bytes held
}

// New returns an empty Objects.
func New() *Objects { return &Objects{bodies: map[string][]byte{}, ended: map[string]int{}} }

// listPage is how many keys one LIST returns on S3.
const listPage = 1000

// ObjectsEnd marks the objects under p.SagaID's prefix as ended, as
// s3objects does: Ended reports them, and Stats counts the LISTs and
// COPYs S3 would bill.
func (o *Objects) ObjectsEnd(ctx context.Context, p *durable.ObjectsEndParams) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	prefix := durable.ObjectPrefix(p.SagaID)
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for k := range o.bodies {
		if strings.HasPrefix(k, prefix) {
			o.ended[k]++
			n++
		}
	}
	o.stats.Lists += 1 + max(n-1, 0)/listPage
	o.stats.Copies += n
	return nil
}

// Ended reports how many times the object under key was marked ended
// (ObjectsEnd): 0 while its saga has not ended for good.
func (o *Objects) Ended(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ended[key]
}

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
	delete(o.ended, p.Key) // as on S3: a put replaces the object, and its tags
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
		delete(o.ended, key)
	}
}
