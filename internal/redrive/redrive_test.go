package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/memqueue"
	"github.com/lambdasaga/lambdasaga/internal/redrive"
	"github.com/lambdasaga/lambdasaga/internal/startqueue"
)

// rig is a memqueue with dead letters, and the redrive's sources on it.
type rig struct {
	clock *durable.ManualClock
	q     *memqueue.Queue
}

func newRig(t *testing.T) *rig {
	t.Helper()
	clock := durable.NewManualClock(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	return &rig{clock: clock, q: memqueue.New(memqueue.Config{Clock: clock})}
}

// deadLetter puts n bodies named prefix-i on q's dead-letter queue.
func (r *rig) deadLetter(t *testing.T, q durable.QueueName, prefix string, n int) {
	t.Helper()
	for i := range n {
		if err := r.q.SendBody(t.Context(), durable.DeadLetter(q), fmt.Appendf(nil, "%s-%d", prefix, i), 0); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *rig) sources(t *testing.T, wrap func(redrive.DeadLetters) redrive.DeadLetters) []redrive.Source {
	t.Helper()
	srcs, missing, err := (&redrive.MemoryQueues{Queue: r.q}).Sources(t.Context(), nil)
	if err != nil || !slices.Equal(missing, []redrive.Queue{redrive.Start}) {
		t.Fatalf("sources: missing %v, %v", missing, err)
	}
	if wrap != nil {
		for i := range srcs {
			srcs[i].Letters = wrap(srcs[i].Letters)
		}
	}
	return srcs
}

// bodies is the sorted bodies on a queue.
func (r *rig) bodies(q durable.QueueName) []string {
	var out []string
	for _, b := range r.q.Bodies(q) {
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

var fast = redrive.Params{Wait: time.Millisecond, Poll: time.Millisecond}

func with(p redrive.Params, f func(*redrive.Params)) redrive.Params { f(&p); return p }

func names(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	slices.Sort(out)
	return out
}

func TestRedriveMovesEveryLetterBackToItsQueue(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.deadLetter(t, durable.QueueAdvance, "a", 25)
	r.deadLetter(t, durable.QueueCompensate, "c", 3)
	var progress []redrive.Progress
	res := redrive.Redrive(t.Context(), r.sources(t, nil), with(fast, func(p *redrive.Params) { p.Progress = func(pr redrive.Progress) { progress = append(progress, pr) } }))
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if res.Moved != 28 || len(res.Queues) != 2 || res.Queues[0].Moved != 25 || res.Queues[1].Moved != 3 || res.Queues[0].Before.Visible != 25 {
		t.Fatalf("result %+v", res)
	}
	if got := r.bodies(durable.QueueAdvance); !slices.Equal(got, names("a", 25)) {
		t.Errorf("advance holds %v", got)
	}
	if got := r.bodies(durable.QueueCompensate); !slices.Equal(got, names("c", 3)) {
		t.Errorf("compensate holds %v", got)
	}
	if n := r.q.Len(durable.DeadLetter(durable.QueueAdvance)) + r.q.Len(durable.DeadLetter(durable.QueueCompensate)); n != 0 {
		t.Errorf("%d letters left in the dead-letter queues", n)
	}
	if len(progress) != 4 || progress[2].Moved != 25 { // 10, 20, 25; then 3
		t.Errorf("progress %+v", progress)
	}
}

func TestRedriveMaxBoundsTheLettersMovedOverAllQueues(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.deadLetter(t, durable.QueueAdvance, "a", 5)
	r.deadLetter(t, durable.QueueCompensate, "c", 5)
	res := redrive.Redrive(t.Context(), r.sources(t, nil), with(fast, func(p *redrive.Params) { p.Max = 7 }))
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if res.Moved != 7 || res.Queues[0].Moved != 5 || res.Queues[1].Moved != 2 {
		t.Fatalf("result %+v", res)
	}
	if a, c := r.q.Len(durable.QueueCompensate), r.q.Len(durable.DeadLetter(durable.QueueCompensate)); a != 2 || c != 3 {
		t.Errorf("compensate %d, its dead letters %d; want 2 and 3", a, c)
	}
}

func TestRedriveDryRunCountsAndMovesNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.deadLetter(t, durable.QueueAdvance, "a", 4)
	res := redrive.Redrive(t.Context(), r.sources(t, nil), with(fast, func(p *redrive.Params) { p.DryRun = true }))
	if res.Err() != nil || !res.DryRun || res.Moved != 0 || res.Queues[0].Before.Visible != 4 || res.Queues[1].Before.Visible != 0 {
		t.Fatalf("result %+v, %v", res, res.Err())
	}
	if r.q.Len(durable.DeadLetter(durable.QueueAdvance)) != 4 || r.q.Len(durable.QueueAdvance) != 0 {
		t.Error("a dry run moved letters")
	}
}

// crashing fails every Delete after the first, as a process that dies
// between a send and its delete: the letters sent are then in both
// queues.
type crashing struct {
	redrive.DeadLetters
	deletes int
}

func (c *crashing) Delete(ctx context.Context, ls []redrive.Letter) error {
	if c.deletes++; c.deletes > 1 {
		return errors.New("killed")
	}
	return c.DeadLetters.Delete(ctx, ls)
}

func TestRedriveCrashBetweenSendAndDeleteDuplicatesAndLosesNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.deadLetter(t, durable.QueueAdvance, "a", 25)
	res := redrive.Redrive(t.Context(), r.sources(t, func(d redrive.DeadLetters) redrive.DeadLetters { return &crashing{DeadLetters: d} }), fast)
	if res.Err() == nil || !strings.Contains(res.Err().Error(), "not deleted") {
		t.Fatalf("want the crash reported, got %v", res.Err())
	}
	// Moved counts what is on the source queue: the batch deleted and
	// the batch sent.
	dlq := durable.DeadLetter(durable.QueueAdvance)
	if res.Moved != 20 || r.q.Len(durable.QueueAdvance) != 20 || r.q.Len(dlq) != 15 {
		t.Fatalf("moved %d; advance %d, dead letters %d; want 20, 20, 15", res.Moved, r.q.Len(durable.QueueAdvance), r.q.Len(dlq))
	}
	// Run again once the crashed run's letters are visible again: the
	// rest moves, and the 10 sent twice arrive twice.
	r.clock.Advance(6 * time.Minute)
	res = redrive.Redrive(t.Context(), r.sources(t, nil), fast)
	if res.Err() != nil || res.Moved != 15 {
		t.Fatalf("re-run moved %d: %v", res.Moved, res.Err())
	}
	got := slices.Compact(r.bodies(durable.QueueAdvance))
	if !slices.Equal(got, names("a", 25)) || r.q.Len(durable.QueueAdvance) != 35 || r.q.Len(dlq) != 0 {
		t.Fatalf("advance holds %d (%d distinct), dead letters %d", r.q.Len(durable.QueueAdvance), len(got), r.q.Len(dlq))
	}
}

// interrupting cancels the redrive's context once a batch is sent, as
// SIGINT would then.
type interrupting struct {
	redrive.DeadLetters
	cancel context.CancelFunc
}

func (i *interrupting) Return(ctx context.Context, ls []redrive.Letter) ([]redrive.Letter, error) {
	sent, err := i.DeadLetters.Return(ctx, ls)
	i.cancel()
	return sent, err
}

func TestRedriveInterruptedAfterASendDeletesWhatItSent(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.deadLetter(t, durable.QueueAdvance, "a", 25)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res := redrive.Redrive(ctx, r.sources(t, func(d redrive.DeadLetters) redrive.DeadLetters { return &interrupting{DeadLetters: d, cancel: cancel} }), fast)
	if !errors.Is(res.Err(), context.Canceled) || res.Moved != 10 {
		t.Fatalf("moved %d: %v", res.Moved, res.Err())
	}
	dlq := durable.DeadLetter(durable.QueueAdvance)
	if r.q.Len(durable.QueueAdvance) != 10 || r.q.Len(dlq) != 15 {
		t.Fatalf("advance %d, dead letters %d: the batch sent was not deleted", r.q.Len(durable.QueueAdvance), r.q.Len(dlq))
	}
	res = redrive.Redrive(t.Context(), r.sources(t, nil), fast)
	if res.Err() != nil || res.Moved != 15 || !slices.Equal(r.bodies(durable.QueueAdvance), names("a", 25)) {
		t.Fatalf("re-run moved %d: %v", res.Moved, res.Err())
	}
}

// refusing gives the letters whose body starts "refused" a reason, as
// the start queue's attribute does.
type refusing struct{ redrive.DeadLetters }

func (f refusing) Receive(ctx context.Context, max int, vis, wait time.Duration) ([]redrive.Letter, error) {
	ls, err := f.DeadLetters.Receive(ctx, max, vis, wait)
	for i, l := range ls {
		if why, ok := strings.CutPrefix(string(l.Body), "refused "); ok {
			ls[i].Reason = strings.TrimRight(why, "-0123456789")
		}
	}
	return ls, err
}

func TestRedriveLeavesRefusedLettersAndCountsTheirReasons(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.deadLetter(t, durable.QueueAdvance, "refused unknown saga", 12)
	r.deadLetter(t, durable.QueueAdvance, "kept failing", 4)
	r.deadLetter(t, durable.QueueAdvance, "refused bad input", 3)
	srcs := r.sources(t, func(d redrive.DeadLetters) redrive.DeadLetters { return refusing{d} })[:1]
	res := redrive.Redrive(t.Context(), srcs, fast)
	q := res.Queues[0]
	want := []redrive.ReasonCount{{Reason: "unknown saga", Count: 12}, {Reason: "bad input", Count: 3}}
	if res.Err() != nil || q.Moved != 4 || q.Skipped != 15 || !slices.Equal(q.Reasons, want) {
		t.Fatalf("result %+v, %v", q, res.Err())
	}
	if got := r.bodies(durable.QueueAdvance); !slices.Equal(got, names("kept failing", 4)) {
		t.Errorf("advance holds %v", got)
	}
	// The refused ones are visible again at once, for the next look.
	ds, _ := r.q.Receive(t.Context(), &durable.ReceiveParams{Queue: durable.DeadLetter(durable.QueueAdvance), Max: 10})
	if len(ds) != 10 || r.q.Len(durable.DeadLetter(durable.QueueAdvance)) != 15 {
		t.Errorf("%d refused letters visible after the redrive, %d kept", len(ds), r.q.Len(durable.DeadLetter(durable.QueueAdvance)))
	}
	r.clock.Advance(time.Hour)
	res = redrive.Redrive(t.Context(), srcs, with(fast, func(p *redrive.Params) { p.IncludeRefused = true }))
	if res.Err() != nil || res.Moved != 15 || r.q.Len(durable.DeadLetter(durable.QueueAdvance)) != 0 {
		t.Fatalf("with refused ones: moved %d: %v", res.Moved, res.Err())
	}
}

// taskMover is a move task that moves a memory queue's letters at once,
// or has none (unsupported).
type taskMover struct {
	redrive.DeadLetters
	unsupported bool
	started     int
}

func (m *taskMover) StartMove(ctx context.Context) (string, error) {
	if m.unsupported {
		return "", fmt.Errorf("InvalidAction: %w", redrive.ErrUnsupported)
	}
	m.started++
	for {
		ls, err := m.Receive(ctx, 10, time.Minute, 0)
		if err != nil || len(ls) == 0 {
			return "task-1", err
		}
		if _, err := m.Return(ctx, ls); err != nil {
			return "", err
		}
		if err := m.Delete(ctx, ls); err != nil {
			return "", err
		}
	}
}

func (m *taskMover) MoveStatus(context.Context, string) (redrive.MoveStatus, error) {
	return redrive.MoveStatus{Status: "COMPLETED", Moved: 6, ToMove: 6}, nil
}

func (m *taskMover) CancelMove(context.Context, string) error { return nil }

func TestRedriveUsesTheMoveTaskAndFallsBackWhereThereIsNone(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.deadLetter(t, durable.QueueAdvance, "a", 6)
	r.deadLetter(t, durable.QueueCompensate, "c", 6)
	var movers []*taskMover
	srcs := r.sources(t, func(d redrive.DeadLetters) redrive.DeadLetters {
		m := &taskMover{DeadLetters: d, unsupported: len(movers) == 1}
		movers = append(movers, m)
		return m
	})
	res := redrive.Redrive(t.Context(), srcs, fast)
	a, c := res.Queues[0], res.Queues[1]
	if res.Err() != nil || !a.ByTask || a.Moved != 6 || movers[0].started != 1 || c.ByTask || !c.Unsupported || c.Moved != 6 {
		t.Fatalf("advance %+v, compensate %+v: %v", a, c, res.Err())
	}
	// A bounded redrive does not start a task: it cannot be bounded.
	r.deadLetter(t, durable.QueueAdvance, "b", 6)
	res = redrive.Redrive(t.Context(), srcs[:1], with(fast, func(p *redrive.Params) { p.Max = 2 }))
	if res.Err() != nil || res.Moved != 2 || res.Queues[0].ByTask || movers[0].started != 1 {
		t.Fatalf("bounded: %+v: %v", res.Queues[0], res.Err())
	}
}

func TestReasonAttributeIsTheStartQueues(t *testing.T) {
	t.Parallel()
	if redrive.ReasonAttribute != startqueue.AttrReason {
		t.Fatalf("redrive reads %q, the start queue writes %q", redrive.ReasonAttribute, startqueue.AttrReason)
	}
}

// runningTask is a move task that never ends until cancelled.
type runningTask struct {
	redrive.DeadLetters
	cancelled chan struct{}
}

func (m *runningTask) StartMove(context.Context) (string, error) { return "task-2", nil }

func (m *runningTask) MoveStatus(context.Context, string) (redrive.MoveStatus, error) {
	select {
	case <-m.cancelled:
		return redrive.MoveStatus{Status: "CANCELLED", Moved: 40}, nil
	default:
		return redrive.MoveStatus{Status: "RUNNING", Running: true, Moved: 40, ToMove: 100}, nil
	}
}

func (m *runningTask) CancelMove(context.Context, string) error { close(m.cancelled); return nil }

func TestRedriveInterruptedCancelsTheMoveTask(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	task := &runningTask{cancelled: make(chan struct{})}
	srcs := r.sources(t, func(d redrive.DeadLetters) redrive.DeadLetters { task.DeadLetters = d; return task })[:1]
	ctx, cancel := context.WithCancel(t.Context())
	res := redrive.Redrive(ctx, srcs, with(fast, func(p *redrive.Params) {
		p.Progress = func(pr redrive.Progress) {
			if pr.ByTask && pr.ToMove == 100 {
				cancel()
			}
		}
	}))
	select {
	case <-task.cancelled:
	default:
		t.Fatal("the move task was not cancelled")
	}
	if q := res.Queues[0]; !errors.Is(q.Err, context.Canceled) || !q.ByTask || q.Moved != 40 {
		t.Fatalf("result %+v", q)
	}
}
