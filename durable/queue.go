package durable

import (
	"context"
	"time"
)

// QueueName says which queue a message goes to.
type QueueName string

const (
	QueueAdvance    QueueName = "advance"    // runs a step's action
	QueueCompensate QueueName = "compensate" // runs a compensation
)

// QueueNames lists every queue.
func QueueNames() []QueueName { return []QueueName{QueueAdvance, QueueCompensate} }

// Message asks a worker to continue a saga that is at Version.
type Message struct {
	SagaID string // the saga to continue
	// Version is the version the saga is expected to be at: the one the
	// transition that sent the message wrote. 1 to MaxVersion.
	Version uint64
	Queue   QueueName // the queue it goes to, which says action or compensation
	Step    string    // the id of the step whose action (or compensation) the saga waits on
	Attempt int       // which attempt of that action, from 1
	// Kind is what the message asks; the zero kind (KindStep) is a step's
	// action or compensation. The others belong to forks (docs/PROTOCOL.md,
	// "Forks"): Step names the fork step, and Attempt is 1.
	Kind MessageKind
	// Child is the index of the child a KindLaunch starts, or the child a
	// KindExpire walk goes on from, 0 to MaxForkChildren-1; zero for
	// every other kind.
	Child int
	// Delay holds the message back before its first delivery (a retry's
	// backoff), at most MaxDelay; zero: at once. It is not part of the body.
	Delay time.Duration
}

// MessageKind says what a message asks of the saga it names.
type MessageKind string

const (
	// KindStep: run the action (or compensation) of Step, attempt Attempt,
	// of the saga at Version.
	KindStep MessageKind = ""
	// KindLaunch: start child Child of the fork at Step of the saga at
	// Version. It is never queued: whoever sends the saga's outbox starts
	// the child itself, with the saga's state in hand.
	KindLaunch MessageKind = "launch"
	// KindEnded: the saga, a child run, ended at Version: count it in its
	// fork's record.
	KindEnded MessageKind = "ended"
	// KindJoin: the fork at Step that the saga made at Version has closed:
	// every child it started has ended.
	KindJoin MessageKind = "join"
	// KindUndo: the saga, a child run that succeeded at Version, is to be
	// compensated as a whole, because its parent compensates.
	KindUndo MessageKind = "undo"
	// KindStop: the fork at Step of the saga at Version fails from outside
	// (a cancel, the saga's deadline): record it in the fork's record and
	// cancel its running children. Queued, unlike KindLaunch, so that the
	// sender of the outbox that holds it does one send, not the stop of
	// the fork, and of every fork below it, itself.
	KindStop MessageKind = "stop"
	// KindExpire: the saga, a root that ended succeeded or compensated at
	// Version (or a child run of such a root's tree), is over for good:
	// every item of its tree (its forks' children at any depth and their
	// fork records) is to expire on the root's schedule. Attempt-1 is the
	// fork visit (saga.State.Forks) the walk goes on from, and Child the
	// child of that visit: a walk too long for one message continues in
	// another. Queued on QueueAdvance.
	KindExpire MessageKind = "expire"
)

// MaxForkChildren bounds the children of one fork: the elements of a
// foreach's list, or a parallel's branches.
const MaxForkChildren = 10_000

// MaxDelay is the longest delay one queue message can carry (SQS's limit).
const MaxDelay = 15 * time.Minute

// Queue sends messages. Implementations are safe for concurrent use;
// queuetest.Exercise is the contract.
type Queue interface {
	// Send enqueues every message on its Queue, each after its Delay (at
	// most MaxDelay). It returns nil only when all were accepted; on error
	// some may have been sent, and sending them again is safe because the
	// protocol drops duplicates.
	Send(ctx context.Context, msgs []Message) error
}

// Delivery is a received message.
type Delivery struct {
	Queue         QueueName // the queue it was received from
	MessageID     string    // the queue's id of the message, for logs
	ReceiptHandle string    // names this delivery to Delete
	Body          []byte    // as sent; DecodeMessage reads it
	ReceiveCount  int       // 1 on the first delivery
}

// ReceiveParams asks for up to Max messages from Queue.
type ReceiveParams struct {
	Queue QueueName // the queue to receive from
	Max   int       // 1 to 10
	// Wait is how long to wait for a first message (long polling); zero returns at once.
	Wait time.Duration
	// Visibility is how long received messages stay hidden before they are
	// delivered again, unless deleted; zero takes the queue's default.
	Visibility time.Duration
}

// DeleteParams removes a received message for good.
type DeleteParams struct {
	Queue         QueueName // the Delivery's Queue
	ReceiptHandle string    // the Delivery's ReceiptHandle
}

// Receiver is the consuming side of a queue, used by in-process workers and
// the local event-source poller; in AWS, Lambda's event source mapping does it.
type Receiver interface {
	// Receive returns up to Max visible messages, hiding them for the
	// visibility timeout. A message received more than the queue's limit
	// moves to its dead-letter queue instead, body untouched.
	Receive(ctx context.Context, params *ReceiveParams) ([]Delivery, error)
	// Delete removes a received message. A stale receipt handle is not an error.
	Delete(ctx context.Context, params *DeleteParams) error
}

// DeadLetter names the dead-letter queue of q.
func DeadLetter(q QueueName) QueueName { return q + "-dlq" }
