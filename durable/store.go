package durable

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
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
	// Child marks a child run of a fork (a branch, an iteration, a child
	// saga): its parent may undo it long after it ended, so a store never
	// expires it. Unlisted marks a branch or an iteration: a store keeps
	// it out of SagaList (its parent's status shows it), so that a fork
	// costs no index write per child; its timers are still listed by
	// SagaListDue. Reads return both.
	Child, Unlisted bool
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

// DefinitionDeployParams makes a stored definition the current version of
// its name (Store.DefinitionDeploy).
type DefinitionDeployParams struct {
	Name string // the saga's name; the stored definition's Name
	Hash string // the definition to run for Name from now on, stored by DefinitionPut
}

// DefinitionCurrentParams reads the current version of a name
// (Store.DefinitionCurrent).
type DefinitionCurrentParams struct {
	Name string // the saga's name
	// Consistent asks for a read that sees every deploy that returned
	// before it (store/dynamo: a strongly consistent read, twice the
	// read units). Without it, a deploy of the last second may not be
	// seen yet and the version before it is returned: what a start by
	// name needs, since it runs whatever version is current as it reads.
	Consistent bool
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
	// DefinitionDeploy makes the stored definition Hash the current
	// version of Name: what DefinitionCurrent returns from then on, in
	// place of the one before (the sagas that run it keep it, by hash).
	// ErrNotFound when no definition is stored under Hash; ErrConflict
	// when the one stored is named otherwise. Deploying the current
	// version again is a no-op; of concurrent deploys of one name, the
	// last to land is current.
	DefinitionDeploy(ctx context.Context, params *DefinitionDeployParams) error
	// DefinitionCurrent returns the current version of a name (the
	// definition last deployed for it), or ErrNotFound when none was
	// ever deployed. Unless Consistent, it may return the version before
	// a deploy of the last second; it never returns ErrNotFound for a name
	// deployed before it was called.
	DefinitionCurrent(ctx context.Context, params *DefinitionCurrentParams) (*DefinitionRecord, error)
	// ForkCount counts one ended child of a fork, in one conditional
	// write and no read first: it sets lane Lane's count to Count+1 only
	// if the lane holds Count (a lane never counted, or a record that does
	// not exist, holds 0), creating the record if there is none. A child
	// counted as failed also sets the record's Failed to Child unless a
	// failed child is set already (the first one counted is kept), and
	// stops its lane. It returns the record just after this update, which
	// holds every update made before it. ErrConflict when the lane holds
	// another count (this child was counted already, or a child before it
	// in the lane was not): nothing changes. Counts of different lanes
	// never conflict; of any number of concurrent counts of one lane from
	// one Count, exactly one succeeds. An error (not ErrConflict) for a
	// Key, Lane, Count or Child out of range (ForkCountParams.Check).
	ForkCount(ctx context.Context, params *ForkCountParams) (*ForkRecord, error)
	// ForkStop adds Lane to the record's stopped lanes, creating the
	// record if there is none, and returns the record just after. It is
	// idempotent: stopping a stopped lane changes nothing. It is not
	// conditional and never conflicts.
	ForkStop(ctx context.Context, params *ForkStopParams) (*ForkRecord, error)
	// ForkFail sets the record's Failed to Child unless a failed child is
	// set already, creating the record if there is none, and returns the
	// record just after. It counts nothing and stops no lane: a fork's
	// parent records so a failure from outside the fork (a cancel, its
	// deadline), after which no count licenses another child. It never
	// conflicts. An error for a Key or Child out of range.
	ForkFail(ctx context.Context, params *ForkFailParams) (*ForkRecord, error)
	// ForkCancelled adds Lanes to the record's cancelled lanes, creating
	// the record if there is none: the stop of a failed fork has cancelled
	// the current child of each (or created it cancelled) and sent what
	// the cancel wrote, and a later delivery of the stop need not do it
	// again. It is idempotent. A store that cannot add atomically may
	// return ErrConflict after other updates of the set, again and again,
	// won each race. An error for a Key or a lane out of range, or no
	// lane.
	ForkCancelled(ctx context.Context, params *ForkCancelledParams) error
	// ForkGet reads a fork record with a consistent read: it sees every
	// count and stop that returned before it was called. ErrNotFound
	// when the fork has none (no child was counted, no lane stopped).
	ForkGet(ctx context.Context, params *ForkGetParams) (*ForkRecord, error)
	// SagaExpire marks a saga of a tree whose root ended for good (a
	// branch, an iteration, a child saga, at any depth) to expire when a
	// root saga that ended at EndedAt does (store/dynamo: its ttl set to
	// EndedAt plus the retention). It changes nothing a read returns and
	// creates nothing: ErrNotFound when there is no such saga (a child
	// its fork never launched). It is idempotent and never conflicts. A
	// later SagaUpdate replaces the saga whole, and with it the mark. A
	// store that keeps every saga forever may do nothing.
	SagaExpire(ctx context.Context, params *SagaExpireParams) error
	// ForkExpire marks a fork record as SagaExpire marks a saga: it
	// changes nothing ForkGet returns, creates nothing (ErrNotFound when
	// the fork has no record), is idempotent and never conflicts. A later
	// count or stop keeps the mark.
	ForkExpire(ctx context.Context, params *ForkExpireParams) error
}

// SagaExpireParams marks one saga of a finished tree to expire
// (Store.SagaExpire).
type SagaExpireParams struct {
	SagaID  string    // the saga: a child run of the tree
	EndedAt time.Time // when the tree's root ended (its UpdatedAt): the schedule it expires on
}

// ForkExpireParams marks one fork record of a finished tree to expire
// (Store.ForkExpire).
type ForkExpireParams struct {
	Key     string    // the fork (ForkKey)
	EndedAt time.Time // when the tree's root ended, as in SagaExpireParams
}

// Check reports an empty key or one longer than MaxForkKeyBytes.
func (p *ForkExpireParams) Check() error {
	return checkFork(p.Key, 0)
}

// MaxRecordStateBytes is the longest encoded state a store must hold in
// one SagaRecord: the engine never writes more (a saga that failed may
// hold up to this much; one that runs forward, less).
const MaxRecordStateBytes = 380 << 10

// MaxForkLanes is the most lanes a fork has: a foreach runs at most this
// many children at once, a parallel at most this many branches. Lanes are
// numbered 0 to MaxForkLanes-1. It bounds the fork record, so that a
// store can keep it small (store/dynamo: under 1 KB, one write unit).
const MaxForkLanes = 100

// MaxForkKeyBytes is the longest fork key: ForkKey never makes a longer
// one, and a store refuses one (ForkCountParams.Check).
const MaxForkKeyBytes = 128

// ForkKey is the key of the fork record of one visit to a fork step of a
// parent saga: "<parent id>#<step>#<visit>" (neither a saga id nor a step
// id holds a '#', so distinct forks have distinct keys). When that is
// longer than MaxForkKeyBytes, it is "f" followed by the first 40 hex
// digits of its SHA-256: it holds no '#', so it is never a short key.
func ForkKey(parentID, step string, visit uint64) string {
	k := parentID + "#" + step + "#" + strconv.FormatUint(visit, 10)
	if len(k) <= MaxForkKeyBytes {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "f" + hex.EncodeToString(sum[:20])
}

// ForkRecord is what a store keeps of one fork (docs/PROTOCOL.md, "The
// fork record: lanes"): how many children of each lane have ended, the
// lanes that stopped, and the first child counted as failed. Lane j of a
// fork of C lanes runs its children j, j+C, j+2C, ... one after the other,
// so a lane's count says which of its children is current.
type ForkRecord struct {
	Key string // the fork's key (ForkKey)
	// Counts holds, for each lane j, how many of its children have been
	// counted (ForkCount); a lane past its end, or never counted, holds
	// 0. Its length is the highest lane ever counted plus one (empty when
	// none): use Count(j) for any lane.
	Counts  []int
	Stopped []int // the lanes that stopped (a failure counted in them, or ForkStop), ascending, each once
	Failed  int   // the index of the first child counted as failed; -1: none
	// Cancelled holds the lanes whose current child the fork's stop has
	// cancelled, its messages sent (ForkCancelled), ascending, each once.
	// After a fork fails, a lane's current child changes only to one
	// created cancelled, by the message that counted the one before.
	Cancelled []int
}

// Count is how many children of lane j have been counted: Counts[j], or
// 0 for a lane past the end of Counts.
func (r *ForkRecord) Count(j int) int {
	if j < 0 || j >= len(r.Counts) {
		return 0
	}
	return r.Counts[j]
}

// IsStopped reports whether lane j has stopped.
func (r *ForkRecord) IsStopped(j int) bool {
	_, ok := slices.BinarySearch(r.Stopped, j)
	return ok
}

// IsCancelled reports whether the fork's stop has cancelled lane j.
func (r *ForkRecord) IsCancelled(j int) bool {
	_, ok := slices.BinarySearch(r.Cancelled, j)
	return ok
}

// ForkCountParams counts one ended child of a fork (Store.ForkCount).
type ForkCountParams struct {
	Key  string // the fork (ForkKey)
	Lane int    // the child's lane, 0 to MaxForkLanes-1
	// Count is how many children of the lane the caller knows were
	// counted before this one (the child's position in its lane: child k
	// of a fork of C lanes is lane k mod C's child k div C). The count
	// happens only if the lane holds it, and leaves it at Count+1.
	Count int
	// Failed: the child did not succeed. The record's Failed becomes
	// Child if no failed child is set yet, and the lane stops.
	Failed bool
	Child  int // the child's index in the fork; read only when Failed
}

// Check reports what is out of range in p: an empty key or one longer
// than MaxForkKeyBytes, a lane outside 0 to MaxForkLanes-1, a negative
// count, or a failed child with a negative index. Every store checks it
// before it writes.
func (p *ForkCountParams) Check() error {
	if err := checkFork(p.Key, p.Lane); err != nil {
		return err
	}
	if p.Count < 0 {
		return fmt.Errorf("fork %s: count %d of lane %d is negative", p.Key, p.Count, p.Lane)
	}
	if p.Failed && p.Child < 0 {
		return fmt.Errorf("fork %s: failed child %d is negative", p.Key, p.Child)
	}
	return nil
}

// ForkStopParams stops one lane of a fork (Store.ForkStop).
type ForkStopParams struct {
	Key  string // the fork (ForkKey)
	Lane int    // the lane to stop, 0 to MaxForkLanes-1
}

// Check reports what is out of range in p, as ForkCountParams.Check does.
func (p *ForkStopParams) Check() error {
	return checkFork(p.Key, p.Lane)
}

// ForkFailParams records a fork's failure (Store.ForkFail).
type ForkFailParams struct {
	Key   string // the fork (ForkKey)
	Child int    // the failed child's index, or any index past the fork's last for a failure from outside it
}

// Check reports an empty key or one longer than MaxForkKeyBytes, or a
// negative child.
func (p *ForkFailParams) Check() error {
	if err := checkFork(p.Key, 0); err != nil {
		return err
	}
	if p.Child < 0 {
		return fmt.Errorf("fork %s: failed child %d is negative", p.Key, p.Child)
	}
	return nil
}

// ForkCancelledParams records lanes a fork's stop has cancelled
// (Store.ForkCancelled).
type ForkCancelledParams struct {
	Key   string // the fork (ForkKey)
	Lanes []int  // each 0 to MaxForkLanes-1
	// Every, when positive, records every lane of a fork of Every lanes
	// (1 to MaxForkLanes) instead of Lanes: the stop is done in all of
	// them. The set then holds exactly those, and needs no read to write.
	Every int
}

// Check reports what is out of range in p, as ForkCountParams.Check
// does, no lane, or both Lanes and Every.
func (p *ForkCancelledParams) Check() error {
	if p.Every != 0 {
		if err := checkFork(p.Key, p.Every-1); err != nil {
			return err
		}
		if len(p.Lanes) > 0 {
			return fmt.Errorf("fork %s: cancelled lanes and every lane at once", p.Key)
		}
		return nil
	}
	if len(p.Lanes) == 0 {
		return fmt.Errorf("fork %s: no cancelled lane to record", p.Key)
	}
	for _, j := range p.Lanes {
		if err := checkFork(p.Key, j); err != nil {
			return err
		}
	}
	return nil
}

// ForkGetParams reads one fork record (Store.ForkGet).
type ForkGetParams struct {
	Key string // the fork (ForkKey)
}

// Check reports an empty key or one longer than MaxForkKeyBytes.
func (p *ForkGetParams) Check() error {
	return checkFork(p.Key, 0)
}

func checkFork(key string, lane int) error {
	if key == "" || len(key) > MaxForkKeyBytes {
		return fmt.Errorf("fork key %q: must be 1 to %d bytes", key, MaxForkKeyBytes)
	}
	if lane < 0 || lane >= MaxForkLanes {
		return fmt.Errorf("fork %s: lane %d out of range 0 to %d", key, lane, MaxForkLanes-1)
	}
	return nil
}
