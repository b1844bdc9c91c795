// Package redrive moves dead letters back to the queues they came from
// (sagactl redrive, the console's dead-letter page, client.Redrive).
//
// Two ways, chosen per dead-letter queue: the queue service's own move
// (SQS's message move task, a Mover), when it has one and the whole queue
// is to move; else one letter at a time, received from the dead-letter
// queue, sent to its source queue, and only then deleted. A crash between
// the send and the delete leaves the letter in both queues: it is
// delivered twice, never lost, and the protocol drops the second copy by
// its version (docs/PROTOCOL.md); a start queue request is idempotent by
// its saga id, signal delivery id or token.
//
// A letter that carries a refusal reason (the start queue's, attribute
// lambdasaga-reason) was refused by the function, not given up on by the
// queue: redriving it usually refuses it again. Such letters stay where
// they are unless Params.IncludeRefused; their reasons are counted either
// way.
package redrive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Queue names a source queue whose dead letters are redriven.
type Queue string

const (
	Advance    Queue = "advance"    // the advance queue: steps' actions
	Compensate Queue = "compensate" // the compensate queue: compensations
	Start      Queue = "start"      // the start queue: requests from any service
)

// Queues lists every queue, in the order a redrive takes them.
func Queues() []Queue { return []Queue{Advance, Compensate, Start} }

// ParseQueue reads a queue's name.
func ParseQueue(s string) (Queue, error) {
	for _, q := range Queues() {
		if string(q) == s {
			return q, nil
		}
	}
	return "", fmt.Errorf("no queue %q (advance, compensate, start)", s)
}

// Letter is one dead letter received.
type Letter struct {
	ID      string // the queue's id of the message: the same at every receive
	Receipt string // names this receive to Delete and Release
	Body    []byte
	// Reason is the refusal reason the letter carries; "" when the queue
	// moved it after too many receives.
	Reason string
	// Attributes are the message's attributes, sent on with it; the
	// backend's own type.
	Attributes any
}

// Depth is what a dead-letter queue holds.
type Depth struct {
	Visible  int // ApproximateNumberOfMessages: waiting to be received
	InFlight int // ApproximateNumberOfMessagesNotVisible: received, not yet deleted (a redrive under way)
}

// DeadLetters is one dead-letter queue and the queue its letters go back
// to. Implementations are safe for concurrent use.
type DeadLetters interface {
	// Depth counts the dead-letter queue's messages.
	Depth(ctx context.Context) (Depth, error)
	// Receive hides up to max (1 to 10) letters for visibility and returns
	// them; none when the queue shows no visible letter within wait.
	Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]Letter, error)
	// Return sends letters to the source queue, each with its body and
	// attributes and no delay, and returns those the queue took. On error
	// some may have been sent: the returned ones.
	Return(ctx context.Context, letters []Letter) ([]Letter, error)
	// Delete removes letters from the dead-letter queue. A receipt gone
	// stale is no error: the letter stays, and moves again later.
	Delete(ctx context.Context, letters []Letter) error
	// Release makes received letters visible again at once.
	Release(ctx context.Context, letters []Letter) error
}

// ErrUnsupported is what a Mover returns when the queue service has no
// move of its own (an emulator): the letters then move one at a time.
var ErrUnsupported = errors.New("the queue service cannot move messages itself")

// Mover is a DeadLetters whose queue service moves a whole dead-letter
// queue back itself (SQS StartMessageMoveTask).
type Mover interface {
	// StartMove starts moving every letter to the source queue and
	// returns the task's handle; ErrUnsupported (wrapped) when the service
	// has no such move.
	StartMove(ctx context.Context) (string, error)
	// MoveStatus reports the task handle names.
	MoveStatus(ctx context.Context, handle string) (MoveStatus, error)
	// CancelMove stops the task; what it moved stays moved.
	CancelMove(ctx context.Context, handle string) error
}

// MoveStatus is a move task's progress.
type MoveStatus struct {
	Running bool   // still moving
	Moved   int    // ApproximateNumberOfMessagesMoved
	ToMove  int    // ApproximateNumberOfMessagesToMove, when known
	Status  string // RUNNING, COMPLETED, CANCELLING, CANCELLED, FAILED
	Failure string // why it failed
}

// Source is one queue's dead letters.
type Source struct {
	Queue   Queue
	Letters DeadLetters
}

// Finder finds the dead-letter queues of a stack.
type Finder interface {
	// Sources returns the dead letters of each queue asked for (all when
	// none is), in Queues' order, and names the queues it has none for
	// (a stack whose start queue it was not told of).
	Sources(ctx context.Context, queues []Queue) ([]Source, []Queue, error)
}

// asked is the queues of queues in Queues' order, each once; all for none.
func asked(queues []Queue) []Queue {
	if len(queues) == 0 {
		return Queues()
	}
	return slices.DeleteFunc(Queues(), func(q Queue) bool { return !slices.Contains(queues, q) })
}

// Params says what a redrive moves.
type Params struct {
	// Max bounds the letters moved over all queues; 0: all. A bounded
	// redrive moves one letter at a time (a move task cannot be bounded).
	Max int
	// DryRun counts the letters and moves none.
	DryRun bool
	// IncludeRefused moves the letters that carry a refusal reason too.
	IncludeRefused bool
	// Progress, when set, hears each batch moved and each poll of a move
	// task.
	Progress func(Progress)
	// Visibility hides a received letter while it moves; default 5
	// minutes. A crash leaves the letters it held hidden that long.
	Visibility time.Duration
	// Wait is how long an empty receive waits before the queue counts as
	// emptied; default 1s.
	Wait time.Duration
	// Poll is how often a move task is asked how far it is; default 2s.
	Poll time.Duration
}

// Progress is where one queue's redrive is.
type Progress struct {
	Queue   Queue
	Moved   int
	Skipped int  // refused letters left in the dead-letter queue
	ToMove  int  // what a move task said it had to move; 0 when not known
	ByTask  bool // the queue service moves them (Mover)
}

// QueueResult is what a redrive did to one queue's dead letters.
type QueueResult struct {
	Queue  Queue
	Before Depth // the dead-letter queue's depth when the redrive began
	Moved  int   // letters now on the source queue
	// Skipped counts the refused letters left in the dead-letter queue
	// (Params.IncludeRefused unset).
	Skipped int
	// Reasons counts the refusal reasons of the letters received, most
	// frequent first.
	Reasons []ReasonCount
	// ByTask: the queue service moved them (Mover); reasons are then
	// not read.
	ByTask bool
	// Unsupported: the service has no move of its own, and the letters
	// moved one at a time.
	Unsupported bool
	// Err is why the queue's redrive stopped early; the counts say what
	// it did before.
	Err error
}

// ReasonCount is how many letters gave one refusal reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// Result is what a redrive did.
type Result struct {
	Queues []QueueResult
	Moved  int // over all queues
	DryRun bool
	// Missing names the queues asked for whose dead letters were not
	// found (a stack whose start queue was not named).
	Missing []Queue
}

// Err joins the queues' errors.
func (r *Result) Err() error {
	var errs []error
	for _, q := range r.Queues {
		if q.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", q.Queue, q.Err))
		}
	}
	return errors.Join(errs...)
}

// Redrive moves the dead letters of sources back, as p says. It goes on
// to the next queue after one fails; the result says what moved, and its
// Err what failed. A cancelled ctx stops it between batches (a move task
// is cancelled): what moved stays moved.
func Redrive(ctx context.Context, sources []Source, p Params) *Result {
	if p.Visibility <= 0 {
		p.Visibility = 5 * time.Minute
	}
	if p.Wait <= 0 {
		p.Wait = time.Second
	}
	if p.Poll <= 0 {
		p.Poll = 2 * time.Second
	}
	res := &Result{DryRun: p.DryRun}
	for _, src := range sources {
		qr := QueueResult{Queue: src.Queue}
		qr.Before, qr.Err = src.Letters.Depth(ctx)
		if qr.Err == nil && !p.DryRun && ctx.Err() == nil {
			budget := -1
			if p.Max > 0 {
				budget = p.Max - res.Moved
			}
			if budget != 0 {
				qr.Err = redriveOne(ctx, src, p, budget, &qr)
			}
		}
		res.Moved += qr.Moved
		res.Queues = append(res.Queues, qr)
	}
	return res
}

// RedriveFound finds the dead letters of queues (none: all) with f and
// redrives them; Result.Missing names the queues f has none for. The
// error is f's, or Result.Err.
func RedriveFound(ctx context.Context, f Finder, queues []Queue, p Params) (*Result, error) {
	srcs, missing, err := f.Sources(ctx, queues)
	if err != nil {
		return nil, err
	}
	res := Redrive(ctx, srcs, p)
	res.Missing = missing
	return res, res.Err()
}

// redriveOne moves one queue's letters, at most budget of them (-1: all).
func redriveOne(ctx context.Context, src Source, p Params, budget int, qr *QueueResult) error {
	// A move task moves everything, reasons unread: only for a whole
	// queue whose letters carry no refusal to skip or count.
	if m, ok := src.Letters.(Mover); ok && budget < 0 && src.Queue != Start {
		err := byTask(ctx, src.Queue, m, p, qr)
		if !errors.Is(err, ErrUnsupported) {
			return err
		}
		qr.Unsupported = true
	}
	return oneByOne(ctx, src, p, budget, qr)
}

// byTask moves a queue's letters with the service's move task, polling
// it until it ends; a cancelled ctx cancels the task.
func byTask(ctx context.Context, q Queue, m Mover, p Params, qr *QueueResult) error {
	handle, err := m.StartMove(ctx)
	if err != nil {
		return err
	}
	qr.ByTask = true
	t := time.NewTicker(p.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			calm, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			cerr := m.CancelMove(calm, handle)
			if st, err := m.MoveStatus(calm, handle); err == nil {
				qr.Moved = st.Moved
			}
			if cerr != nil {
				return fmt.Errorf("interrupted, and the move task could not be cancelled (it goes on: aws sqs cancel-message-move-task --task-handle %s): %w", handle, cerr)
			}
			return fmt.Errorf("interrupted: move task cancelled: %w", ctx.Err())
		case <-t.C:
		}
		st, err := m.MoveStatus(ctx, handle)
		if err != nil {
			if ctx.Err() != nil {
				continue // cancel it above
			}
			return fmt.Errorf("move task %s: %w", handle, err)
		}
		qr.Moved = st.Moved
		if p.Progress != nil {
			p.Progress(Progress{Queue: q, Moved: st.Moved, ToMove: st.ToMove, ByTask: true})
		}
		if !st.Running {
			if st.Status == "COMPLETED" {
				return nil
			}
			return fmt.Errorf("move task ended %s: %s", st.Status, st.Failure)
		}
	}
}

// oneByOne moves letters one batch at a time: receive, send to the
// source, and only then delete. Refused letters not to move stay hidden
// while it runs (so it does not receive them again), and are released at
// the end; a batch of letters all seen before means the queue went round.
func oneByOne(ctx context.Context, src Source, p Params, budget int, qr *QueueResult) (err error) {
	dl := src.Letters
	seen := map[string]bool{}
	reasons := map[string]int{}
	var skipped []Letter
	skippedAt := map[string]int{} // a letter received again: its latest receipt
	defer func() {
		qr.Reasons = reasonCounts(reasons)
		if len(skipped) == 0 {
			return
		}
		calm, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for batch := range slices.Chunk(skipped, 10) {
			if rerr := dl.Release(calm, batch); rerr != nil {
				// They come back by themselves after Visibility.
				err = errors.Join(err, fmt.Errorf("refused letters left hidden for up to %s: %w", p.Visibility, rerr))
				return
			}
		}
	}()
	for budget != 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		n := 10
		if budget > 0 {
			n = min(n, budget)
		}
		letters, err := dl.Receive(ctx, n, p.Visibility, p.Wait)
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		var move []Letter
		fresh := 0
		for _, l := range letters {
			again := seen[l.ID]
			if !again {
				fresh++
				seen[l.ID] = true
				if l.Reason != "" {
					reasons[l.Reason]++
				}
			}
			if l.Reason != "" && !p.IncludeRefused {
				if i, ok := skippedAt[l.ID]; ok {
					skipped[i] = l
				} else {
					qr.Skipped++
					skippedAt[l.ID] = len(skipped)
					skipped = append(skipped, l)
				}
				continue
			}
			move = append(move, l)
		}
		if fresh == 0 && len(move) == 0 {
			return nil // emptied, or round the queue once
		}
		if len(move) > 0 {
			sent, serr := dl.Return(ctx, move)
			qr.Moved += len(sent)
			if budget > 0 {
				budget -= len(sent)
			}
			if len(sent) > 0 {
				// The letters are on the source queue: delete them even
				// when interrupted now, or they move twice (harmless).
				calm, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				derr := dl.Delete(calm, sent)
				cancel()
				if derr != nil {
					return fmt.Errorf("%d letters sent back but not deleted from the dead-letter queue: they are delivered twice, which the protocol allows: %w", len(sent), derr)
				}
			}
			if serr != nil {
				if unsent := unsentOf(move, sent); len(unsent) > 0 {
					calm, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
					_ = dl.Release(calm, unsent) // else back after Visibility
					cancel()
				}
				return fmt.Errorf("send: %w", serr)
			}
		}
		if p.Progress != nil {
			p.Progress(Progress{Queue: src.Queue, Moved: qr.Moved, Skipped: qr.Skipped})
		}
	}
	return nil
}

// unsentOf is the letters of move not in sent.
func unsentOf(move, sent []Letter) []Letter {
	var out []Letter
	for _, l := range move {
		if !slices.ContainsFunc(sent, func(s Letter) bool { return s.Receipt == l.Receipt }) {
			out = append(out, l)
		}
	}
	return out
}

// reasonCounts is the reasons, most frequent first, then by text.
func reasonCounts(m map[string]int) []ReasonCount {
	out := make([]ReasonCount, 0, len(m))
	for _, r := range slices.Sorted(maps.Keys(m)) {
		out = append(out, ReasonCount{Reason: r, Count: m[r]})
	}
	slices.SortStableFunc(out, func(a, b ReasonCount) int { return cmp.Compare(b.Count, a.Count) })
	return out
}
