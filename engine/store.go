package engine

import (
	"context"
	"time"
)

// SagaRecord is a saga as a store holds it: the encoded State and the
// fields a store indexes.
type SagaRecord struct {
	SagaID         string
	Version        uint64
	Status         Status
	Name           string
	DefinitionHash string
	UpdatedAt      time.Time
	State          []byte // State.MarshalBinary
}

// SagaCreateParams creates a saga at its first version.
type SagaCreateParams struct {
	Record SagaRecord
}

// SagaGetParams reads one saga.
type SagaGetParams struct {
	SagaID string
}

// SagaUpdateParams replaces a saga, conditionally on its stored version.
type SagaUpdateParams struct {
	Record          SagaRecord // Record.Version is ExpectedVersion+1
	ExpectedVersion uint64
}

// SagaListParams lists sagas, most recently updated first.
type SagaListParams struct {
	Status Status // empty: every status
	Limit  int    // at most this many; 0 means 100
	Cursor string // from a previous SagaListResult; empty for the first page
}

// SagaSummary is one saga in a listing.
type SagaSummary struct {
	SagaID         string
	Name           string
	Status         Status
	Version        uint64
	DefinitionHash string
	UpdatedAt      time.Time
}

// SagaListResult is one page of a listing.
type SagaListResult struct {
	Sagas      []SagaSummary
	NextCursor string // empty on the last page
}

// DefinitionPutParams stores a definition's source under its content hash.
type DefinitionPutParams struct {
	Hash   string
	Name   string
	Source []byte
}

// DefinitionGetParams reads a definition by hash.
type DefinitionGetParams struct {
	Hash string
}

// DefinitionRecord is a stored definition.
type DefinitionRecord struct {
	Hash   string
	Name   string
	Source []byte
}

// Store keeps saga state and definitions. Implementations are safe for
// concurrent use; storetest.Exercise is the contract every one must pass.
// A store never keeps the slices it is given (callers reuse their buffers)
// and never shares the slices it returns.
type Store interface {
	// SagaCreate writes a new saga. It returns ErrExists when a saga with
	// the id exists, whatever its state.
	SagaCreate(ctx context.Context, params *SagaCreateParams) error
	// SagaGet reads a saga with a consistent read: it sees every write that
	// returned before it was called. It returns ErrNotFound when there is none.
	SagaGet(ctx context.Context, params *SagaGetParams) (*SagaRecord, error)
	// SagaUpdate writes the saga only if its stored version is
	// ExpectedVersion, and returns ErrConflict when it is not (another
	// writer won) and ErrNotFound when the saga does not exist. Of any
	// number of concurrent updates from one version, exactly one succeeds.
	SagaUpdate(ctx context.Context, params *SagaUpdateParams) error
	// SagaList pages through sagas, most recently updated first, optionally
	// of one status. A saga updated during a listing may be missed or seen twice.
	SagaList(ctx context.Context, params *SagaListParams) (*SagaListResult, error)
	// DefinitionPut stores a definition; storing the same hash again is a
	// no-op. Definitions are immutable: a different source under a stored
	// hash is ErrConflict.
	DefinitionPut(ctx context.Context, params *DefinitionPutParams) error
	// DefinitionGet returns a definition, or ErrNotFound.
	DefinitionGet(ctx context.Context, params *DefinitionGetParams) (*DefinitionRecord, error)
}

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
	Queue         QueueName
	MessageID     string
	ReceiptHandle string
	Body          []byte
	ReceiveCount  int // 1 on the first delivery
}

// ReceiveParams asks for up to Max messages from Queue.
type ReceiveParams struct {
	Queue QueueName
	Max   int // 1 to 10
	// Wait is how long to wait for a first message (long polling); zero returns at once.
	Wait time.Duration
	// Visibility is how long received messages stay hidden before they are
	// delivered again, unless deleted; zero takes the queue's default.
	Visibility time.Duration
}

// DeleteParams removes a received message for good.
type DeleteParams struct {
	Queue         QueueName
	ReceiptHandle string
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
