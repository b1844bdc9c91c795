package sim

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// faultyStore injects faults around the memory store and records every
// write that lands.
type faultyStore struct {
	durable.Store
	w *world

	// A join reads its children on goroutines of its own: reads are
	// serialized, and their faults drawn from the saga read and how often
	// it was, not from the world's random source, so that a seed still
	// replays exactly.
	mu    sync.Mutex
	reads map[string]uint64
}

// readFault reports whether this read of saga id is throttled.
func (s *faultyStore) readFault(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.w.faults {
		return false
	}
	if s.reads == nil {
		s.reads = map[string]uint64{}
	}
	s.reads[id]++
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", s.w.cfg.Seed, id, s.reads[id])
	// FNV's high bits follow the last bytes poorly: mix them (splitmix64's
	// finalizer) before reading a fraction off them.
	x := h.Sum64()
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	if float64(x>>11)/(1<<53) >= s.w.cfg.FaultRate {
		return false
	}
	s.w.report.Faults["throttled_read"]++
	return true
}

func (s *faultyStore) SagaGet(ctx context.Context, p *durable.SagaGetParams) (*durable.SagaRecord, error) {
	if s.readFault(p.SagaID) {
		return nil, durable.ErrThrottled
	}
	rec, err := s.Store.SagaGet(ctx, p)
	if d := s.w.delivery; err == nil && s.w.cfg.Sabotage == "ended-before-end" && d != nil && d.kind == durable.KindEnded && d.sagaID == p.SagaID && !rec.Status.Final() {
		// A store that shows a running child as ended to its ended
		// message: its fork counts it, and launches the next one.
		st := &saga.State{}
		if st.UnmarshalBinary(rec.State) == nil {
			st.Status, st.Cursors = durable.StatusSucceeded, nil
			if b, merr := st.MarshalBinary(); merr == nil {
				fake := *rec
				fake.State, fake.Status = b, durable.StatusSucceeded
				return &fake, nil
			}
		}
	}
	return rec, err
}

func (s *faultyStore) SagaCreate(ctx context.Context, p *durable.SagaCreateParams) error {
	if s.w.gone() {
		return errCrash
	}
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
	if s.w.gone() {
		return errCrash
	}
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
	if s.w.cfg.Sabotage == "drop-carrier" {
		// A store that loses which message carries a chain: a carrier
		// that comes back after a crash mid-chain is taken for stale.
		st := &saga.State{}
		if st.UnmarshalBinary(p.Record.State) == nil && st.Carrier != 0 {
			st.Carrier = 0
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
	cw := committedWrite{id: r.SagaID, version: r.Version, status: r.Status, kept: kept, received: r.Received, seq: w.forks.tick(),
		createdAt: r.CreatedAt, statusSince: r.StatusSince, updatedAt: r.UpdatedAt, wakeAt: r.WakeAt, at: w.clock.Now(), log: w.wrote(r.SagaID)}
	if w.actions.scripts[r.SagaID] == nil {
		w.newChild(r)
		if w.cfg.Sabotage == "ended-before-end" && !r.Status.Final() {
			// The sabotage's ended message, sent as the child starts.
			w.queue.add(durable.AppendMessage(nil, durable.Message{SagaID: r.SagaID, Version: r.Version, Queue: durable.QueueAdvance, Kind: durable.KindEnded, Attempt: 1, Step: "x"}), w.clock.Now())
		}
	}
	if r.Status == durable.StatusCompensating || r.Status == durable.StatusCompensated {
		st := &saga.State{}
		if st.UnmarshalBinary(r.State) == nil {
			cw.cancelled = st.Failure != nil && st.Failure.Type == lang.ErrorTypeCancelled
		}
	}
	if r.Status == durable.StatusWaiting {
		st := &saga.State{}
		if st.UnmarshalBinary(r.State) == nil {
			cur, ok := st.Pending()
			cw.forkWait = ok && cur.Fork
		}
	}
	if d := w.delivery; d != nil && !kept && d.kind == durable.KindJoin && d.sagaID == r.SagaID {
		w.forks.joins[visitKey(r.SagaID, d.version)]++
	}
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
	// What the message is, decoded when it is handled (forkcheck.go
	// counts joins).
	kind    durable.MessageKind
	sagaID  string
	version uint64
	// errs is what each of its receipts ended with, in order ("ok" for a
	// receipt handled but not deleted): why a message reached the
	// dead-letter queue.
	errs []string
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
	// dead are the messages moved to the dead-letter queue, with what
	// their receipts ended with (the bodies are in dlq too).
	dead []*delivery
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
	if q.w.gone() {
		return errCrash
	}
	if q.w.fault("throttled_send") {
		return durable.ErrThrottled
	}
	if q.w.fault("crash_before_send") {
		return errCrash
	}
	now := q.w.clock.Now()
	msgs = q.w.sabotageSend(msgs)
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
			q.dead = append(q.dead, d)
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

// The fork record's calls, with faults: throttling (nothing written), a
// crash before the write, and a crash after it (the write landed, the
// caller sees an error). Each records, for the checks, when a fork's
// failed child was first set.

func (s *faultyStore) ForkCount(ctx context.Context, p *durable.ForkCountParams) (*durable.ForkRecord, error) {
	if s.w.fault("fork_count_throttled") {
		return nil, durable.ErrThrottled
	}
	if s.w.fault("fork_count_crash_before_write") {
		return nil, errCrash
	}
	rec, err := s.Store.ForkCount(ctx, p)
	if err != nil {
		return rec, err
	}
	s.w.forks.noteFork(s.w, p.Key, rec)
	if s.w.fault("fork_count_crash_after_write") {
		return nil, errCrash
	}
	if s.w.cfg.Sabotage == "lying-fork-count" && rec.Failed >= 0 {
		// A store whose after-image hides the failed child: the lane's
		// next child is licensed though the fork failed.
		lie := *rec
		lie.Failed = -1
		return &lie, nil
	}
	return rec, nil
}

func (s *faultyStore) ForkStop(ctx context.Context, p *durable.ForkStopParams) (*durable.ForkRecord, error) {
	if s.w.fault("fork_stop_throttled") {
		return nil, durable.ErrThrottled
	}
	if s.w.fault("fork_stop_crash_before_write") {
		return nil, errCrash
	}
	rec, err := s.Store.ForkStop(ctx, p)
	if err == nil {
		s.w.forks.noteFork(s.w, p.Key, rec)
		if s.w.fault("fork_stop_crash_after_write") {
			return nil, errCrash
		}
	}
	return rec, err
}

func (s *faultyStore) ForkFail(ctx context.Context, p *durable.ForkFailParams) (*durable.ForkRecord, error) {
	if s.w.fault("fork_fail_throttled") {
		return nil, durable.ErrThrottled
	}
	if s.w.fault("fork_fail_crash_before_write") {
		return nil, errCrash
	}
	rec, err := s.Store.ForkFail(ctx, p)
	if err == nil {
		s.w.forks.noteFork(s.w, p.Key, rec)
		if s.w.fault("fork_fail_crash_after_write") {
			return nil, errCrash
		}
	}
	return rec, err
}

func (s *faultyStore) ForkCancelled(ctx context.Context, p *durable.ForkCancelledParams) error {
	if s.w.fault("fork_cancelled_throttled") {
		return durable.ErrThrottled
	}
	if s.w.fault("fork_cancelled_crash_before_write") {
		return errCrash
	}
	if err := s.Store.ForkCancelled(ctx, p); err != nil {
		return err
	}
	if s.w.fault("fork_cancelled_crash_after_write") {
		return errCrash
	}
	return nil
}

func (s *faultyStore) ForkGet(ctx context.Context, p *durable.ForkGetParams) (*durable.ForkRecord, error) {
	if s.w.fault("fork_get_throttled") {
		return nil, durable.ErrThrottled
	}
	return s.Store.ForkGet(ctx, p)
}

// sabotageSend is the sabotages of the queue's sends: "drop-join" loses
// every join; "undo-siblings-early" sends, with the undo of child k of a
// fork, the undo of child k-1, so that siblings are undone at once
// rather than one after the other, the highest first.
func (w *world) sabotageSend(msgs []durable.Message) []durable.Message {
	switch w.cfg.Sabotage {
	case "drop-join":
		var out []durable.Message
		for _, m := range msgs {
			if m.Kind != durable.KindJoin {
				out = append(out, m)
			}
		}
		return out
	case "undo-siblings-early":
		out := msgs
		for _, m := range msgs {
			if m.Kind != durable.KindUndo {
				continue
			}
			i := strings.LastIndexByte(m.SagaID, '.')
			if k, err := strconv.Atoi(m.SagaID[i+1:]); err == nil && k > 0 {
				early := m
				early.SagaID = m.SagaID[:i+1] + strconv.Itoa(k-1)
				out = append(out, early)
			}
		}
		return out
	}
	return msgs
}
