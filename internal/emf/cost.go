package emf

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/cost"
)

// What the functions' work costs, per saga name (EstimatedCost): each
// request the coordinator makes for a saga is counted in the units AWS
// bills it, and priced at flush by cost.ListPrices.USD, the expressions
// sagactl cost's walk uses. The saga's name comes from its item, read or
// written: a request for a saga the function neither read nor wrote since
// the last flush is not counted. Left out (docs/COST.md): the sweep and
// tick, fork records, the event source mapping's empty receives, an
// invocation's start and the time between records, start queue requests'
// own invocation share, and the LIST and COPY that mark a saga's objects
// ended.

// Charge counts what handling one record of a batch of n cost saga
// sagaID, which took the time since start (Now): 1/n of the invocation,
// the time at Config.MemoryMB, and 1/n of the batch's receive and its
// delete (the event source mapping receives a batch with one
// ReceiveMessage and deletes it with one DeleteMessageBatch). A chain
// run from the record is in its time. Nothing without Config.MemoryMB.
func (r *Recorder) Charge(sagaID string, start time.Time, n int) {
	if r.memoryMB == 0 || n <= 0 {
		return
	}
	took := r.now().Sub(start)
	share := 1 / float64(n)
	r.charge(sagaID, cost.Usage{Invocations: share, GBSeconds: cost.GBSeconds(took, r.memoryMB), SQSRequests: 2 * share})
}

// Now is the Recorder's clock, for Charge's start.
func (r *Recorder) Now() time.Time { return r.now() }

// charge adds u to the saga sagaID's name, if known.
func (r *Recorder) charge(sagaID string, u cost.Usage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.known[sagaID]
	if !ok {
		return
	}
	r.chargeName(k.name, u)
}

// chargeName adds u to name and to the total; r.mu is held.
func (r *Recorder) chargeName(name string, u cost.Usage) {
	r.saga(name).usage.Add(u)
	r.total.Add(u)
}

// meterCreate counts a saga's first write: its item, its by_status entry
// put, and its by_due entry when it has a timer.
func (r *Recorder) meterCreate(rec *durable.SagaRecord) {
	wru := cost.WriteUnits(cost.SagaItemBytes(rec)) + cost.WriteUnits(cost.IndexEntryBytes(rec))
	if !rec.WakeAt.IsZero() {
		wru++ // by_due entries are about 100 bytes
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.known[rec.SagaID] = knownSaga{name: rec.Name, status: rec.Status, wakeAt: rec.WakeAt}
	r.chargeName(rec.Name, cost.Usage{WRU: wru})
}

// meterGet counts a strongly consistent read of the item.
func (r *Recorder) meterGet(rec *durable.SagaRecord) {
	u := cost.Usage{RRU: cost.ReadUnits(cost.SagaItemBytes(rec))}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.known[rec.SagaID] = knownSaga{name: rec.Name, status: rec.Status, wakeAt: rec.WakeAt}
	r.chargeName(rec.Name, u)
}

// meterUpdate counts a conditional write of the item: a write that lost
// bills its units too (DynamoDB Developer Guide, "Conditional writes":
// a failed condition still consumes write units, by the stored item's
// size, taken here as the new one's). One that landed moves the by_status
// entry (a delete and a put) when the status changed, and puts, deletes
// or moves the by_due entry when the timer did; the status and timer
// replaced are those the function last read or wrote (an update of a
// saga it did not is counted without index writes).
func (r *Recorder) meterUpdate(rec *durable.SagaRecord, err error) {
	if err != nil && !errors.Is(err, durable.ErrConflict) {
		return
	}
	wru := cost.WriteUnits(cost.SagaItemBytes(rec))
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.known[rec.SagaID]
	if err == nil {
		if ok && prev.status != rec.Status {
			wru += 2 * cost.WriteUnits(cost.IndexEntryBytes(rec))
		}
		if ok && !prev.wakeAt.Equal(rec.WakeAt) {
			switch {
			case prev.wakeAt.IsZero() || rec.WakeAt.IsZero():
				wru++ // put or deleted
			default:
				wru += 2 // moved
			}
		}
		r.known[rec.SagaID] = knownSaga{name: rec.Name, status: rec.Status, wakeAt: rec.WakeAt}
	}
	r.chargeName(rec.Name, cost.Usage{WRU: wru})
}

// Queue wraps q so that, with Config.MemoryMB, the Recorder counts the
// requests each send bills: one SendMessageBatch per queue and per ten
// messages (queue/sqsqueue sends so; every message is far under 64 KB),
// charged to the first message's saga.
func (r *Recorder) Queue(q durable.Queue) durable.Queue {
	return &sendMeter{Queue: q, r: r}
}

type sendMeter struct {
	durable.Queue
	r *Recorder
}

func (s *sendMeter) Send(ctx context.Context, msgs []durable.Message) error {
	err := s.Queue.Send(ctx, msgs)
	if err == nil && s.r.memoryMB > 0 && len(msgs) > 0 {
		s.r.charge(msgs[0].SagaID, cost.Usage{SQSRequests: sendRequests(msgs)})
	}
	return err
}

// sendRequests is the batches msgs are sent in: per queue, one per ten.
func sendRequests(msgs []durable.Message) float64 {
	n := 0
	for i, m := range msgs {
		first, count := true, 0
		for j, o := range msgs {
			if o.Queue == m.Queue {
				if j < i {
					first = false
					break
				}
				count++
			}
		}
		if first {
			n += (count + 9) / 10
		}
	}
	return float64(n)
}

// Objects wraps o so that, with Config.MemoryMB, the Recorder counts each
// PUT and GET of a large value, charged to the saga whose key prefix it
// has (durable.ObjectKey). What o may also do (durable.ObjectsEnder)
// stays visible.
func (r *Recorder) Objects(o durable.Objects) durable.Objects {
	m := objectMeter{Objects: o, r: r}
	if e, ok := o.(durable.ObjectsEnder); ok {
		return &endingObjectMeter{objectMeter: m, ender: e}
	}
	return &m
}

type objectMeter struct {
	durable.Objects
	r *Recorder
}

type endingObjectMeter struct {
	objectMeter
	ender durable.ObjectsEnder
}

func (m *endingObjectMeter) ObjectsEnd(ctx context.Context, p *durable.ObjectsEndParams) error {
	return m.ender.ObjectsEnd(ctx, p)
}

func (m *objectMeter) ObjectPut(ctx context.Context, p *durable.ObjectPutParams) error {
	err := m.Objects.ObjectPut(ctx, p)
	if err == nil && m.r.memoryMB > 0 {
		m.r.charge(objectSaga(p.Key), cost.Usage{S3Puts: 1})
	}
	return err
}

func (m *objectMeter) ObjectGet(ctx context.Context, p *durable.ObjectGetParams) ([]byte, error) {
	body, err := m.Objects.ObjectGet(ctx, p)
	if err == nil && m.r.memoryMB > 0 {
		m.r.charge(objectSaga(p.Key), cost.Usage{S3Gets: 1})
	}
	return body, err
}

// objectSaga is the saga id a key starts with.
func objectSaga(key string) string {
	id, _, _ := strings.Cut(key, "/")
	return id
}
