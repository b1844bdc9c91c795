package durable

import (
	"context"
	"time"
)

// SagaRecord is a saga as a store holds it: the encoded State and the
// fields a store indexes.
type SagaRecord struct {
	SagaID         string    // the key; see ValidSagaID
	Version        uint64    // transitions so far: 1 when created, one more at each update
	Status         Status    // listings filter on it
	Name           string    // the saga's name, from its definition
	DefinitionHash string    // the key of the definition the saga runs (DefinitionRecord.Hash)
	CreatedAt      time.Time // the time of the first transition; never changes
	// StatusSince is when the saga entered Status: the time of the first
	// transition that wrote this status, kept by the writes after it that
	// keep the status. Listings sort on it, newest first, and the sweep
	// reads only sagas in their status since before a bound. A store may
	// index it: it changes only when Status does.
	StatusSince time.Time
	UpdatedAt   time.Time // the time of the last transition
	// WakeAt is when a timer of the saga is due (a wait, a timeout, the
	// saga's deadline while it waits); zero: none. A store indexes it
	// (SagaListDue); it changes only when the saga starts or stops
	// waiting on a timer, or its timer changes.
	WakeAt time.Time
	State  []byte // State.MarshalBinary
	// Received counts the writes that kept a signal (or a callback's
	// completion) for later without a transition: they keep Version, so
	// that messages in flight stay valid, and move Received up by one.
	// Every update is conditional on it as on the version (absent is 0).
	Received uint64
	// Resends counts the sweep's re-sends of the saga's outbox since the
	// write of this version (SagaSetResends). Reads return it; create and
	// update ignore it and store zero, so it counts only while the saga
	// makes no progress.
	Resends int
}

// SagaCreateParams creates a saga at its first version.
type SagaCreateParams struct {
	Record SagaRecord // the saga at its first version, 1
}

// SagaGetParams reads one saga.
type SagaGetParams struct {
	SagaID string // the saga to read
}

// SagaUpdateParams replaces a saga, conditionally on its stored version.
type SagaUpdateParams struct {
	// Record.Version is ExpectedVersion+1 for a transition; it is
	// ExpectedVersion for a write that keeps a delivery, whose
	// Record.Received is ExpectedReceived+1.
	Record          SagaRecord
	ExpectedVersion uint64 // the version the saga must be stored at for the write to happen
	// ExpectedReceived is the Received the saga must be stored with: a
	// write that read the saga before a delivery was kept loses.
	ExpectedReceived uint64
}

// SagaListParams lists sagas, those that entered their status most
// recently first (StatusSince, then SagaID, both descending).
type SagaListParams struct {
	Status Status // empty: every status
	// Limit: at most this many; 0 means 100. A store may cap it
	// (store/dynamo returns at most 1,000).
	Limit  int
	Cursor string // from a previous SagaListResult; empty for the first page
	// EnteredBefore, when set, keeps only the sagas whose StatusSince is
	// before it: the sagas in their status for longer than now minus it.
	EnteredBefore time.Time
}

// SagaSummary is one saga in a listing: what a store can keep in an index
// without writing it again while the saga keeps its status. A saga's
// version and update time change at every transition: read the saga for
// them.
type SagaSummary struct {
	SagaID         string    // the saga's id
	Name           string    // the saga's name, from its definition
	Status         Status    // its status when listed
	DefinitionHash string    // the key of the definition it runs
	CreatedAt      time.Time // when it started
	StatusSince    time.Time // when it entered Status; the listing's order
}

// SagaListResult is one page of a listing.
type SagaListResult struct {
	Sagas []SagaSummary // one page, newest StatusSince first
	// NextCursor continues the listing after the last saga of this page;
	// empty on the last page. It names a position in the order, not a
	// saga, so it stays valid however the sagas change.
	NextCursor string
}

// SagaListDueParams lists the sagas whose timer is due.
type SagaListDueParams struct {
	Before time.Time // only sagas whose WakeAt is before it (required)
	Limit  int       // at most this many; 0 means 100; a store may cap it (store/dynamo: 1,000)
	Cursor string    // from a previous SagaListDueResult; empty for the first page
}

// SagaDue is one saga whose timer is due.
type SagaDue struct {
	SagaID string    // the saga's id
	WakeAt time.Time // when its timer is due
}

// SagaListDueResult is one page of due timers, earliest first.
type SagaListDueResult struct {
	Sagas      []SagaDue // earliest WakeAt first (then SagaID)
	NextCursor string    // empty on the last page
}

// SagaSetResendsParams changes the count of re-sends of a saga's stored
// outbox, as a compare-and-set: the sweep claims a re-send (From n, To n+1)
// before it sends, and gives it back (From n+1, To n) if the send fails.
type SagaSetResendsParams struct {
	SagaID   string // the saga
	Version  uint64 // the version whose outbox is re-sent: the count changes only if the saga is still at it
	From, To int    // the count as read, and the count to store
}

// DefinitionPutParams stores a definition's source under its content hash.
type DefinitionPutParams struct {
	Hash   string // the key: the engine gives the hex SHA-256 of Source; a store takes any string
	Name   string // the saga's name, for operators
	Source []byte // the definition as written
}

// DefinitionGetParams reads a definition by hash.
type DefinitionGetParams struct {
	Hash string // as given to DefinitionPut
}

// DefinitionRecord is a stored definition.
type DefinitionRecord struct {
	Hash   string // as stored by DefinitionPut
	Name   string // as stored by DefinitionPut
	Source []byte // as stored by DefinitionPut, byte for byte
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
	// SagaList pages through sagas, newest StatusSince first, optionally of
	// one status and of sagas in their status since before a time. A saga
	// that changes status during a listing may be missed (its StatusSince
	// moves ahead of the cursor); it is not listed twice, since every
	// status change writes a later StatusSince (saga.Advance keeps it so,
	// whatever the writers' clocks).
	SagaList(ctx context.Context, params *SagaListParams) (*SagaListResult, error)
	// SagaListDue pages through the sagas whose WakeAt is set and before
	// Before, earliest first. Like a listing, it is eventually consistent:
	// a timer set a moment ago may be missed by one call.
	SagaListDue(ctx context.Context, params *SagaListDueParams) (*SagaListDueResult, error)
	// SagaSetResends sets the saga's Resends to To if it is stored at
	// Version with Resends From; ErrConflict when either differs (the saga
	// moved on, or another sweep counted first), ErrNotFound when there is
	// none, an error when either count is negative. It changes nothing else: not the version, the state or the
	// update time.
	SagaSetResends(ctx context.Context, params *SagaSetResendsParams) error
	// DefinitionPut stores a definition; storing the same hash again is a
	// no-op. Definitions are immutable: a different source under a stored
	// hash is ErrConflict.
	DefinitionPut(ctx context.Context, params *DefinitionPutParams) error
	// DefinitionGet returns a definition, or ErrNotFound.
	DefinitionGet(ctx context.Context, params *DefinitionGetParams) (*DefinitionRecord, error)
}

// MaxRecordStateBytes is the longest encoded state a store must hold in
// one SagaRecord: the engine never writes more (a saga that failed may
// hold up to this much; one that runs forward, less).
const MaxRecordStateBytes = 380 << 10
