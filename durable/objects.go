package durable

import (
	"context"
	"encoding/hex"
)

// Objects keeps the values too large for a saga's item (an input, an
// action's output, a signal's payload over the engine's threshold), each
// under a key its saga's state refers to. Keys are content-addressed
// (ObjectKey): the body under a key never changes, so a put repeated after
// a retry or a crash is harmless, and a reader may cache a body by its key
// for as long as it likes. The engine puts an object before the write of
// the state that refers to it: a crash between them leaves an object no
// state names, which expires with its saga's retention, never a reference
// to nothing. objects/objectstest is the suite every implementation passes.
//
// Implementations are safe for concurrent use.
type Objects interface {
	// ObjectPut stores p.Body under p.Key. Putting a key that exists is
	// not an error (the body is the same: the key is its hash). An error
	// leaves it unknown whether the object was stored: ErrThrottled when
	// the backend asked to slow down, anything else when it failed.
	ObjectPut(ctx context.Context, p *ObjectPutParams) error
	// ObjectGet returns the body stored under p.Key, which the caller must
	// not modify: ErrNotFound when there is none (never put, or expired).
	ObjectGet(ctx context.Context, p *ObjectGetParams) ([]byte, error)
}

// ObjectPutParams stores one object.
type ObjectPutParams struct {
	Key  string // ObjectKey of the body
	Body []byte // at most MaxObjectBytes; the implementation copies it if it keeps it
}

// ObjectGetParams reads one object.
type ObjectGetParams struct {
	Key string // the key it was put under
}

// ObjectsEnder is what an Objects may also do: mark the objects of a
// saga that ended for good, so that they expire with its retention.
// Until marked, an object never expires by its age: a saga may run, wait
// or stay parked for as long as it likes, and keep its values. The engine
// finds it by type assertion on CoordinatorConfig.Objects; a store
// without it keeps objects until something else removes them.
type ObjectsEnder interface {
	// ObjectsEnd marks every object under p.SagaID's key prefix
	// ("<saga id>/": the objects its versions referred to, values it
	// replaced since, and those put before a write that then lost) as
	// ended: each expires with the retention from now on. A saga with no
	// objects is not an error. Marking again is harmless (it may restart
	// the retention), so a caller retries the whole call after an error,
	// which may leave some of the objects marked: ErrThrottled when the
	// backend asked to slow down. It never creates an object, and an
	// object that vanishes while it is marked (expired) is passed over.
	ObjectsEnd(ctx context.Context, p *ObjectsEndParams) error
}

// ObjectsEndParams marks the objects of one saga as ended.
type ObjectsEndParams struct {
	SagaID string // the saga whose objects (ObjectKey(SagaID, ...)) are marked
}

// ObjectPrefix is the prefix of the keys of saga sagaID's objects
// (ObjectKey): "<saga id>/". No other saga's key starts with it: a saga id
// holds no "/".
func ObjectPrefix(sagaID string) string { return sagaID + "/" }

// MaxObjectBytes is the largest body an Objects must keep: one value of a
// saga, encoded (32 MiB).
const MaxObjectBytes = 32 << 20

// ObjectKey is the key of the object whose body has SHA-256 sum, put by
// saga sagaID: "<saga id>/<64 hex digits>". The saga id first keeps a
// saga's objects under one prefix; a saga id needs no escaping in an S3
// key (ValidSagaID).
func ObjectKey(sagaID string, sum [32]byte) string {
	b := make([]byte, 0, len(sagaID)+1+64)
	b = append(b, sagaID...)
	b = append(b, '/')
	return string(hex.AppendEncode(b, sum[:]))
}
