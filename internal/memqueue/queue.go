// Package memqueue is a durable.Queue and durable.Receiver in process memory,
// with SQS's semantics where the protocol depends on them: delays,
// visibility timeouts and redelivery, receive counts, and a dead-letter
// queue after too many receives. It passes the same queuetest suite as
// queue/sqsqueue. Like every adapter it imports only durable of this
// module.
package memqueue

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
)

var (
	_ durable.Queue    = (*Queue)(nil)
	_ durable.Receiver = (*Queue)(nil)
)

// Config sets up a Queue. The zero value is usable.
type Config struct {
	// Clock decides when delays and visibility timeouts end; default: the system clock.
	Clock durable.Clock
	// MaxReceives: a message received more often than this moves to the
	// dead-letter queue (durable.DeadLetter of its queue); default 5.
	// Dead-letter queues themselves keep their messages however often received.
	MaxReceives int
	// Visibility is the default visibility timeout; default 30s.
	Visibility time.Duration
	// PollInterval is how often a long poll looks again for messages whose
	// delay ended; default 5ms.
	PollInterval time.Duration
}

// Queue holds any number of named queues, made on first use.
type Queue struct {
	cfg     Config
	mu      sync.Mutex
	queues  map[durable.QueueName][]*item
	seq     uint64
	notify  chan struct{} // closed and replaced on a send while receivers wait
	waiters int
}

type item struct {
	id        string
	body      []byte
	visibleAt time.Time
	receives  int
	receipt   string
}

// New returns an empty set of queues.
func New(cfg Config) *Queue {
	if cfg.Clock == nil {
		cfg.Clock = durable.SystemClock{}
	}
	if cfg.MaxReceives == 0 {
		cfg.MaxReceives = 5
	}
	if cfg.Visibility == 0 {
		cfg.Visibility = 30 * time.Second
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 5 * time.Millisecond
	}
	return &Queue{cfg: cfg, queues: map[durable.QueueName][]*item{}, notify: make(chan struct{})}
}

// Send implements durable.Queue.
func (q *Queue) Send(ctx context.Context, msgs []durable.Message) error {
	var buf [256]byte
	for _, m := range msgs {
		if err := q.SendBody(ctx, m.Queue, durable.AppendMessage(buf[:0], m), m.Delay); err != nil {
			return err
		}
	}
	return nil
}

// SendBody puts a raw body on a queue, as another producer (or a poison
// message) would.
func (q *Queue) SendBody(_ context.Context, name durable.QueueName, body []byte, delay time.Duration) error {
	if delay < 0 || delay > durable.MaxDelay {
		return fmt.Errorf("send to %s: delay %s outside 0 to %s", name, delay, durable.MaxDelay)
	}
	q.mu.Lock()
	q.seq++
	it := &item{id: "m-" + strconv.FormatUint(q.seq, 10), body: bytes.Clone(body), visibleAt: q.cfg.Clock.Now().Add(delay)}
	q.queues[name] = append(q.queues[name], it)
	if q.waiters > 0 {
		close(q.notify)
		q.notify = make(chan struct{})
	}
	q.mu.Unlock()
	return nil
}

// Receive implements durable.Receiver.
func (q *Queue) Receive(ctx context.Context, p *durable.ReceiveParams) ([]durable.Delivery, error) {
	maxN := p.Max
	if maxN < 1 || maxN > 10 {
		return nil, fmt.Errorf("receive from %s: max %d outside 1 to 10", p.Queue, p.Max)
	}
	vis := p.Visibility
	if vis == 0 {
		vis = q.cfg.Visibility
	}
	deadline := time.Now().Add(p.Wait)
	for {
		q.mu.Lock()
		out := q.take(p.Queue, maxN, vis)
		if len(out) > 0 || !time.Now().Before(deadline) {
			q.mu.Unlock()
			return out, nil
		}
		wake := q.notify
		q.waiters++
		q.mu.Unlock()
		t := time.NewTimer(min(q.cfg.PollInterval, time.Until(deadline)))
		var err error
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-wake:
		case <-t.C:
		}
		t.Stop()
		q.mu.Lock()
		q.waiters--
		q.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// take receives up to n visible messages, the earliest sent first. It
// looks no further than the n-th: a queue holding many delayed or
// in-flight messages costs a receive only up to the first n visible.
// Called with q.mu held.
func (q *Queue) take(name durable.QueueName, n int, vis time.Duration) []durable.Delivery {
	now := q.cfg.Clock.Now()
	var out []durable.Delivery
	items := q.queues[name]
	moved := 0
	for i, it := range items {
		if len(out) == n {
			break
		}
		if it.visibleAt.After(now) {
			continue
		}
		if it.receives >= q.cfg.MaxReceives && !strings.HasSuffix(string(name), string(durable.DeadLetter(""))) {
			// Received too often: to the dead-letter queue, as it is.
			dlq := durable.DeadLetter(name)
			it.visibleAt, it.receipt, it.receives = now, "", 0
			q.queues[dlq] = append(q.queues[dlq], it)
			items[i] = nil
			moved++
			continue
		}
		it.receives++
		q.seq++
		it.receipt = it.id + "#" + strconv.FormatUint(q.seq, 10)
		it.visibleAt = now.Add(vis)
		out = append(out, durable.Delivery{Queue: name, MessageID: it.id, ReceiptHandle: it.receipt, Body: bytes.Clone(it.body), ReceiveCount: it.receives})
	}
	if moved > 0 {
		q.queues[name] = slices.DeleteFunc(items, func(it *item) bool { return it == nil })
	}
	return out
}

// Delete implements durable.Receiver.
func (q *Queue) Delete(_ context.Context, p *durable.DeleteParams) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.queues[p.Queue]
	for i, it := range items {
		if it.receipt != "" && it.receipt == p.ReceiptHandle {
			q.queues[p.Queue] = append(items[:i], items[i+1:]...)
			return nil
		}
	}
	return nil
}

// Pending says what the queues (dead-letter queues aside) hold: how many
// messages are in flight (received, their visibility timeout running) and
// when the next of the others becomes visible (zero: none queued). A
// runtime on a manual clock moves time on to it when nothing is in
// flight.
func (q *Queue) Pending() (inFlight int, next time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.cfg.Clock.Now()
	for name, items := range q.queues {
		if strings.HasSuffix(string(name), string(durable.DeadLetter(""))) {
			continue
		}
		for _, it := range items {
			switch {
			case it.receipt != "" && it.visibleAt.After(now):
				inFlight++
			case next.IsZero() || it.visibleAt.Before(next):
				next = it.visibleAt
			}
		}
	}
	return inFlight, next
}

// Len counts the messages on a queue, visible or not.
func (q *Queue) Len(name durable.QueueName) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queues[name])
}

// Bodies returns copies of the bodies on a queue, in order, without
// receiving them: for inspecting a dead-letter queue.
func (q *Queue) Bodies(name durable.QueueName) [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([][]byte, 0, len(q.queues[name]))
	for _, it := range q.queues[name] {
		out = append(out, bytes.Clone(it.body))
	}
	return out
}

// ChangeVisibility makes a received message visible again after d (zero:
// at once), as sqsqueue's does; a stale receipt changes nothing.
func (q *Queue) ChangeVisibility(_ context.Context, name durable.QueueName, receipt string, d time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, it := range q.queues[name] {
		if it.receipt != "" && it.receipt == receipt {
			it.visibleAt = q.cfg.Clock.Now().Add(d)
		}
	}
	return nil
}
