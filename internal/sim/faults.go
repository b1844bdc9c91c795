package sim

import (
	"bytes"
	"container/heap"
	"context"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/saga"
)

// faultyStore injects faults around the memory store and records every
// write that lands.
type faultyStore struct {
	durable.Store
	w *world
}

func (s *faultyStore) SagaGet(ctx context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	if s.w.fault("throttled_read") {
		return nil, durable.ErrThrottled
	}
	return s.Store.SagaGet(ctx, p)
}

func (s *faultyStore) SagaCreate(ctx context.Context, p *durable.SagaCreateParams) error {
	if s.w.fault("crash_before_create") {
		return errCrash
	}
	err := s.Store.SagaCreate(ctx, p)
	if err == nil {
		s.w.commit(&p.Record, false)
		if s.w.fault("crash_after_create_before_send") {
			return errCrash
		}
	}
	return err
}

func (s *faultyStore) SagaUpdate(ctx context.Context, p *durable.SagaUpdateParams) error {
	if s.w.fault("throttled_write") {
		return durable.ErrThrottled
	}
	if s.w.fault("crash_before_write") {
		return errCrash
	}
	if s.w.delivery != nil && s.w.depth < 3 && s.w.fault("conflicting_worker") {
		// Another worker got the same message and gets there first.
		s.w.handle(ctx, s.w.delivery)
	}
	if again := s.w.sending; again != nil && s.w.fault("racing_delivery") {
		// The sender's retry (a timeout on its side) races its first try.
		again(ctx)
	}
	kept := p.Record.Version == p.ExpectedVersion
	if s.w.cfg.Sabotage == "drop-kept" && !kept {
		// A store that loses the kept deliveries when a transition lands.
		st := &saga.State{}
		if st.UnmarshalBinary(p.Record.State) == nil && len(st.Kept) > 0 {
			st.Kept = nil
			if b, err := st.MarshalBinary(); err == nil {
				rec := p.Record
				rec.State = b
				p = &durable.SagaUpdateParams{Record: rec, ExpectedVersion: p.ExpectedVersion, ExpectedReceived: p.ExpectedReceived}
			}
		}
	}
	if s.w.cfg.Sabotage == "moving-status-since" {
		// As when the index key held the update time: every write moves it.
		rec := p.Record
		rec.StatusSince = rec.UpdatedAt
		p = &durable.SagaUpdateParams{Record: rec, ExpectedVersion: p.ExpectedVersion, ExpectedReceived: p.ExpectedReceived}
	}
	if s.w.cfg.Sabotage == "unconditional-writes" {
		if cur, err := s.Store.SagaGet(ctx, &durable.SagaGetParams{SagaID: p.Record.SagaID}); err == nil {
			p = &durable.SagaUpdateParams{Record: p.Record, ExpectedVersion: cur.Version, ExpectedReceived: cur.Received}
		}
	}
	err := s.Store.SagaUpdate(ctx, p)
	if err == nil {
		s.w.commit(&p.Record, kept)
		if s.w.fault("crash_after_write_before_send") {
			return errCrash
		}
	}
	return err
}

// commit records the current handle's log as the saga's next committed
// write; the transition's step events join it as the coordinator reports
// them, right after.
//
// For sagas that take signals or callbacks, or have a deadline, it keeps
// a summary of the state written, and a transition that leaves the saga
// waiting on an await or a callback has the senders scheduled.
func (w *world) commit(r *durable.SagaRecord, kept bool) {
	cw := committedWrite{version: r.Version, status: r.Status, kept: kept, received: r.Received,
		createdAt: r.CreatedAt, statusSince: r.StatusSince, updatedAt: r.UpdatedAt, wakeAt: r.WakeAt, at: w.clock.Now(), log: w.top()}
	if sc := w.actions.scripts[r.SagaID]; sc != nil && receives(sc.spec.plan) {
		cw.sum = w.summarize(r, sc.spec.plan)
		if cw.sum != nil && !kept && r.Status == durable.StatusWaiting {
			w.scheduleDeliveries(r.SagaID, sc.spec.plan, cw.sum, cw.sum.pending.Due)
		}
	}
	w.committed[r.SagaID] = append(w.committed[r.SagaID], cw)
}

// delivery is a message in the simulated queue, or an operation of a
// client or operator (op) that runs when it comes due.
type delivery struct {
	id        int
	body      []byte
	op        func(context.Context)
	visibleAt time.Time
	receives  int
}

// simQueue is an SQS-like queue on the virtual clock: delays, visibility
// timeouts, receive counts and a dead-letter queue, with random delivery
// order. Hidden messages wait in a heap by the time they become visible;
// visible ones in a slice, from which delivery picks at random.
type simQueue struct {
	w       *world
	hidden  hiddenHeap
	visible []*delivery
	nextID  int
	dlq     [][]byte
	poison  [][]byte
}

type hiddenHeap []*delivery

func (h hiddenHeap) Len() int { return len(h) }
func (h hiddenHeap) Less(i, j int) bool {
	if !h[i].visibleAt.Equal(h[j].visibleAt) {
		return h[i].visibleAt.Before(h[j].visibleAt)
	}
	return h[i].id < h[j].id
}
func (h hiddenHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *hiddenHeap) Push(x any)   { *h = append(*h, x.(*delivery)) }
func (h *hiddenHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}

func newSimQueue(w *world) *simQueue { return &simQueue{w: w} }

func (q *simQueue) add(body []byte, visibleAt time.Time) {
	q.nextID++
	heap.Push(&q.hidden, &delivery{id: q.nextID, body: bytes.Clone(body), visibleAt: visibleAt})
}

// Send implements durable.Queue, with faults.
func (q *simQueue) Send(_ context.Context, msgs []durable.Message) error {
	if q.w.fault("throttled_send") {
		return durable.ErrThrottled
	}
	if q.w.fault("crash_before_send") {
		return errCrash
	}
	now := q.w.clock.Now()
	for i, m := range msgs {
		q.add(durable.AppendMessage(nil, m), now.Add(m.Delay))
		if i+1 < len(msgs) && q.w.fault("crash_mid_batch") {
			return errCrash
		}
	}
	if q.w.fault("crash_after_send") {
		return errCrash
	}
	return nil
}

// addOp schedules a client's or operator's operation at a virtual time.
func (q *simQueue) addOp(at time.Time, op func(context.Context)) {
	q.nextID++
	heap.Push(&q.hidden, &delivery{id: q.nextID, op: op, visibleAt: at})
}

func (q *simQueue) poisonMessage(body []byte) {
	q.poison = append(q.poison, bytes.Clone(body))
	q.add(body, q.w.clock.Now())
	q.w.report.Faults["poison_message"]++
}

// next picks a random visible message, moving the clock forward when none
// is visible yet, and takes it off the queue until release or delete.
// Messages received too often move to the dead-letter queue.
func (q *simQueue) next() (*delivery, bool) {
	for {
		now := q.w.clock.Now()
		for len(q.hidden) > 0 && !q.hidden[0].visibleAt.After(now) {
			q.visible = append(q.visible, heap.Pop(&q.hidden).(*delivery))
		}
		if len(q.visible) == 0 {
			if len(q.hidden) == 0 {
				return nil, false
			}
			if q.w.tickBefore(q.hidden[0].visibleAt) {
				continue
			}
			q.w.clock.Advance(max(q.hidden[0].visibleAt.Sub(q.w.clock.Now()), 0))
			continue
		}
		i := q.w.rng.IntN(len(q.visible))
		d := q.visible[i]
		q.visible[i] = q.visible[len(q.visible)-1]
		q.visible = q.visible[:len(q.visible)-1]
		if d.op != nil {
			return d, true
		}
		d.receives++
		if d.receives > q.w.cfg.MaxReceives {
			q.dlq = append(q.dlq, d.body)
			continue
		}
		q.w.clock.Advance(time.Millisecond) // handling takes a moment
		return d, true
	}
}

// release puts a delivered message back, visible again at visibleAt.
func (q *simQueue) release(d *delivery, visibleAt time.Time) {
	d.visibleAt = visibleAt
	heap.Push(&q.hidden, d)
}

// delete drops a delivered message for good (it is off the queue already).
func (q *simQueue) delete(*delivery) {}
