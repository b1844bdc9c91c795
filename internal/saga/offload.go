package saga

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/lambdasaga/lambdasaga/durable"
)

// Large values by reference. A saga's state is one item, under
// MaxStateBytes; a value larger than a threshold (an input field, a var
// an action's output went to, a kept signal's payload, a compensation's
// kept output, the saga's output) is kept as an object
// (durable.Objects) and the state holds a Ref in its place: its size and
// the SHA-256 of its encoding. The core never sees a Ref: the engine
// replaces each with its value after reading a state (State.Hydrate) and
// before Advance runs, so expressions and actions see values; encoding a
// state with an Offload (State.RecordOffload) makes the references again,
// and lists the objects to put before the state's write.
//
// Secret input fields stay inline, and so does every input field of a
// child run that inherited secrets: a Redactor reads the secrets' text
// from the state wherever it is shown, with or without its objects.

// MaxValueBytes bounds one value kept as an object, encoded.
const MaxValueBytes = durable.MaxObjectBytes

// Ref is a value kept as an object: what a state holds in its place.
type Ref struct {
	Hash [32]byte // SHA-256 of the value's encoding, the object's body
	Size int      // the body's length in bytes
}

// Key is the object's key for saga sagaID (durable.ObjectKey).
func (r Ref) Key(sagaID string) string { return durable.ObjectKey(sagaID, r.Hash) }

// MarshalJSON shows a reference where a state is printed unhydrated
// (status, the console): its hash and size, never the value.
func (r Ref) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"$ref": map[string]any{"sha256": hex.EncodeToString(r.Hash[:]), "bytes": r.Size}})
}

// String is what fmt prints of a reference.
func (r Ref) String() string { return fmt.Sprintf("ref(sha256:%x, %d bytes)", r.Hash[:6], r.Size) }

// Offload says which values an encoded state keeps as objects, and
// collects them.
type Offload struct {
	// Bytes is the threshold: a value whose encoding is longer is kept as
	// an object. It must be positive.
	Bytes int
	// KeepInput names the input fields that stay inline whatever their
	// size: the plan's secrets (Plan.Secrets).
	KeepInput []string
	// Known, when set, returns the reference of a value already kept as
	// an object, found by identity (the engine's cache of the values it
	// hydrated or put), so that an unchanged value is neither encoded nor
	// hashed again. Values in a state are never modified in place.
	Known func(v any) (Ref, bool)
	// Objects collects, as RecordOffload encodes, the values it kept
	// apart that Known did not know, once each: put them before writing
	// the record that refers to them.
	Objects []Object
	// Refs counts the references the encoding wrote, known or new: when
	// positive, the encoded state has State.Objects set, and so must the
	// state in memory.
	Refs int
	// measure: only the size matters (Advance measuring a state); no hash
	// is computed and nothing is collected.
	measure bool
}

// Object is a value to put: its reference, its body, and the value.
type Object struct {
	Ref   Ref
	Body  []byte // the value's encoding: DecodeValue reads it
	Value any
}

// RecordOffload is Record with the values off says kept as references; the
// objects to put are in off.Objects. The size limit applies to the state
// with its references.
func (st *State) RecordOffload(buf []byte, off *Offload) (durable.SagaRecord, error) {
	return st.record(buf, off)
}

// refBytes is the most a reference takes in a state: its type byte, its
// size and its hash.
const refBytes = 1 + binary.MaxVarintLen64 + sha256.Size

// offload writes v as a reference if it is kept as an object, and
// reports whether it did: only maps, lists, strings and bytes over the
// threshold are.
func (e *encoder) offload(v any) bool {
	switch v.(type) {
	case map[string]any, []any, string, []byte:
	default:
		return false
	}
	if e.off.Known != nil {
		if r, ok := e.off.Known(v); ok {
			e.ref(r)
			e.off.Refs++
			return true
		}
	}
	start := len(e.b)
	e.plain(v, 0)
	n := len(e.b) - start
	if n <= e.off.Bytes || n <= refBytes || e.err != nil {
		return true // inline, as written
	}
	if n > MaxValueBytes {
		e.err = fmt.Errorf("encode state: a value of %d bytes, over the limit of %d: %w", n, MaxValueBytes, errValueTooLarge)
		e.b = append(e.b[:start], valNil)
		return true
	}
	r := Ref{Size: n}
	if !e.off.measure {
		r.Hash = sha256.Sum256(e.b[start:])
		if !e.off.has(r) {
			e.off.Objects = append(e.off.Objects, Object{Ref: r, Body: bytes.Clone(e.b[start:]), Value: v})
		}
	}
	e.b = e.b[:start]
	e.ref(r)
	e.off.Refs++
	return true
}

func (o *Offload) has(r Ref) bool {
	for _, x := range o.Objects {
		if x.Ref == r {
			return true
		}
	}
	return false
}

// errValueTooLarge is the error of a value over MaxValueBytes.
var errValueTooLarge = fmt.Errorf("value larger than %d bytes", MaxValueBytes)

func (e *encoder) ref(r Ref) {
	e.b = binary.AppendUvarint(append(e.b, valRef), uint64(r.Size))
	e.b = append(e.b, r.Hash[:]...)
}

func (d *decoder) ref() any {
	size := d.uint()
	if len(d.b) < sha256.Size {
		d.fail("truncated reference")
		return nil
	}
	var r Ref
	copy(r.Hash[:], d.b)
	d.b = d.b[sha256.Size:]
	if size > MaxValueBytes {
		d.fail("a reference to %d bytes", size)
		return nil
	}
	r.Size = int(size)
	d.refs = true
	return r
}

// DecodeValue decodes an object's body, a value RecordOffload kept apart.
// The caller checks the body against its reference first (CheckBody).
func DecodeValue(body []byte) (any, error) {
	if len(body) > 0 && body[0] == valRef {
		return nil, errors.New("decode value: a reference, not a value")
	}
	d := decoder{b: body}
	v := d.val(0) // depth counts from the value, as the state's encoding counts it
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d stray bytes after a value", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode value: %w", d.err)
	}
	return v, nil
}

// CheckBody reports whether body is the object r refers to.
func (r Ref) CheckBody(body []byte) error {
	if len(body) != r.Size || sha256.Sum256(body) != r.Hash {
		return fmt.Errorf("object of %d bytes is not the %d referred to (sha256 %x)", len(body), r.Size, r.Hash[:6])
	}
	return nil
}

// HasRefs reports whether st holds a reference anywhere Hydrate looks (a
// reader of a state just decoded has it from UnmarshalBinaryRefs).
func (st *State) HasRefs() bool {
	if mapHasRef(st.Input) || mapHasRef(st.Vars) || mapHasRef(st.Scope) || isRef(st.Output) {
		return true
	}
	for i := range st.Stack {
		if isRef(st.Stack[i].Out) || isRef(st.Stack[i].Input) {
			return true
		}
	}
	for i := range st.Kept {
		if isRef(st.Kept[i].Payload) {
			return true
		}
	}
	return false
}

func isRef(v any) bool {
	_, ok := v.(Ref)
	return ok
}

func mapHasRef(m map[string]any) bool {
	for _, v := range m {
		if isRef(v) {
			return true
		}
	}
	return false
}

// Hydrate replaces every reference in st with the value get returns for
// it; the first error stops it.
func (st *State) Hydrate(get func(Ref) (any, error)) error {
	var err error
	st.eachUnit(func(v any) any {
		r := v.(Ref)
		if err != nil {
			return v
		}
		var got any
		if got, err = get(r); err != nil {
			return v
		}
		return got
	})
	return err
}

// eachUnit calls fn on each reference in st where the encoding may put
// one, storing what fn returns in its place, in a defined order (map keys
// sorted): the objects are read in the same order every time.
func (st *State) eachUnit(fn func(any) any) {
	for _, m := range []map[string]any{st.Input, st.Vars, st.Scope} {
		var keys []string
		for k, v := range m {
			if _, ok := v.(Ref); ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			m[k] = fn(m[k])
		}
	}
	for i := range st.Stack {
		c := &st.Stack[i]
		if _, ok := c.Out.(Ref); ok {
			c.Out = fn(c.Out)
		}
		if _, ok := c.Input.(Ref); ok {
			c.Input = fn(c.Input)
		}
	}
	for i := range st.Kept {
		if _, ok := st.Kept[i].Payload.(Ref); ok {
			st.Kept[i].Payload = fn(st.Kept[i].Payload)
		}
	}
	if _, ok := st.Output.(Ref); ok {
		st.Output = fn(st.Output)
	}
}
