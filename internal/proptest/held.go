package proptest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// A chain runs its next step from the state the worker holds, without a
// read (docs/PROTOCOL.md, "Chains"). That is right only if the held state
// is the state a read would give: the codec hides differences Advance and
// Call can see (a time's location and monotonic reading, a map shared by
// two fields, nil against empty, int against int64). Before every chained
// step, heldCheck reads the saga as a message would, and requires that
// the step goes the same way from a copy of each: the same call, and for
// the same outcomes the same encoded state, outbox and step records.

// heldCheck is the engine's BeforeChained hook for one case.
type heldCheck struct {
	store  durable.Store
	byHash map[string]*saga.Plan
	clock  *durable.ManualClock
	res    *Result
	mu     sync.Mutex // the hook runs inside Handle; counts and violations under it
	found  int        // violations recorded
}

// maxHeldViolations bounds what one case records: a difference shows at
// every chained step after it.
const maxHeldViolations = 3

// heldEpoch is the fixed Now of the check, beside the clock's: a day
// after the clock's start, past most deadlines the generator writes, so
// that the paths where a deadline has passed are compared too.
var heldEpoch = time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)

// before is called with the state the chain holds, which it must not change.
func (h *heldCheck) before(held *saga.State) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.res.Chained++
	where := fmt.Sprintf("saga %s version %d", held.SagaID, held.Version)
	plan := h.byHash[held.DefinitionHash] // a child run's own plan
	if plan == nil {
		h.violate("a chained saga's plan is unknown", where+": no plan of hash "+held.DefinitionHash)
		return
	}
	if cur, ok := held.Pending(); ok {
		id, _ := plan.Awaits(cur)
		where += fmt.Sprintf(", before step %s (attempt %d, compensating %t)", id, cur.Attempt, cur.Compensating)
	}
	read, err := readAsMessage(h.store, plan, held.SagaID)
	if err != nil {
		h.violate("a chained saga's read failed", where+": "+err.Error())
		return
	}
	if read.Version != held.Version || read.Received != held.Received {
		h.violate("a chain holds another version than the store",
			fmt.Sprintf("%s: the store holds version %d (%d received), the chain %d (%d received)", where, read.Version, read.Received, held.Version, held.Received))
		return
	}
	differs := diffState(held, read)
	if differs != "" {
		// Stricter than the path: a difference no step shows yet may
		// show in a later one, or in a definition the generator never
		// wrote.
		field, _, _ := strings.Cut(differs, ":")
		h.violate("a chain holds a state other than a read gives, at "+numbers.ReplaceAllString(field, "N"), where+": "+differs)
	}
	nows := []time.Time{heldEpoch, h.clock.Now().UTC()}
	if what, detail := sameContinuation(plan, held, read, nows); what != "" {
		if differs != "" {
			detail += "\n  held and read differ first at " + differs
		}
		h.violate("a chained step goes otherwise from the held state than from a read: "+what, where+": "+detail)
	}
}

func (h *heldCheck) violate(class, detail string) {
	if h.found++; h.found <= maxHeldViolations {
		h.res.violations(class, detail)
	}
}

// readAsMessage reads the saga as the engine does for a message
// (Coordinator.load): decoded, with the store's count of kept deliveries,
// and an empty vars map where the item has none.
func readAsMessage(store durable.Store, plan *saga.Plan, sagaID string) (*saga.State, error) {
	rec, err := store.SagaGet(context.Background(), &durable.SagaGetParams{SagaID: sagaID})
	if err != nil {
		return nil, err
	}
	st := &saga.State{}
	if err := st.UnmarshalBinary(rec.State); err != nil {
		return nil, err
	}
	st.Received = rec.Received
	if err := plan.CheckState(st); err != nil {
		return nil, fmt.Errorf("the stored state does not fit its plan: %w", err)
	}
	if st.Vars == nil && !st.Status.Final() {
		st.Vars = map[string]any{}
	}
	return st, nil
}

// outcome is one way the chained step's action may end.
type outcome struct {
	name string
	echo bool  // the action returns its input: what Call built from each state
	out  any   // the output, without echo
	err  error // the error; nil: success
}

// outcomes are what the check feeds Advance after the call: a success
// with an output holding a time, the action's input echoed, a retryable
// failure, a permanent one, and a timeout (its outcome unknown: the step
// keeps its input for the calls that find it out).
func outcomes() []outcome {
	return []outcome{
		{name: "a success", out: map[string]any{"n": int64(1), "at": heldEpoch.Add(90 * time.Minute)}},
		{name: "an echo of its input", echo: true},
		{name: "a retryable failure", err: saga.NewError("Flaky", "try again")},
		{name: "a permanent failure", err: saga.Permanent(saga.NewError("Declined", "no"))},
		{name: "a timeout", err: context.DeadlineExceeded},
	}
}

// sameContinuation runs the pending step from a copy of held and from a
// copy of read at each of nows: Call, then Advance with each outcome. It
// returns what went otherwise ("" when nothing did) and how. held and read
// are not changed.
func sameContinuation(plan *saga.Plan, held, read *saga.State, nows []time.Time) (what, detail string) {
	for _, now := range nows {
		hc, hp, hCallErr := callOf(plan, deepCopy(held), now)
		rc, rp, rCallErr := callOf(plan, deepCopy(read), now)
		if hp != rp {
			return "Call panics", fmt.Sprintf("now %s: held %q, read %q", now, hp, rp)
		}
		if d := diffErrors(hCallErr, rCallErr); d != "" {
			return "Call's error", fmt.Sprintf("now %s: %s", now, d)
		}
		if d := diffValues("Call", reflect.ValueOf(hc), reflect.ValueOf(rc)); d != "" {
			return "Call", fmt.Sprintf("now %s: %s", now, d)
		}
		carrier := held.Carrier
		if carrier == 0 {
			carrier = held.Version - 1 // the first chained step: the carrier wrote held
		}
		for _, o := range outcomes() {
			ev := func(c saga.Call, callErr error, recs *[]saga.StepRecord) saga.Event {
				e := saga.Event{Kind: saga.EventResult, Now: now, Rand: 0.5, Took: 3 * time.Millisecond, Carrier: carrier, Output: o.out, Err: o.err,
					OnStep: func(r saga.StepRecord) { *recs = append(*recs, r) }}
				if o.echo {
					// As the engine does: a call that failed is a permanent failure.
					e.Output, e.Err = c.Input, saga.Permanent(callErr)
					if callErr != nil {
						e.Output = nil
					}
				}
				return e
			}
			var hrecs, rrecs []saga.StepRecord
			hs, rs := deepCopy(held), deepCopy(read)
			hp, herr := advance(plan, hs, ev(hc, hCallErr, &hrecs))
			rp, rerr := advance(plan, rs, ev(rc, rCallErr, &rrecs))
			at := fmt.Sprintf("now %s, %s", now, o.name)
			if hp != rp {
				return "Advance panics", fmt.Sprintf("%s: held %q, read %q", at, hp, rp)
			}
			if d := diffErrors(herr, rerr); d != "" {
				return "Advance's error", at + ": " + d
			}
			if d := diffValues("records", reflect.ValueOf(hrecs), reflect.ValueOf(rrecs)); d != "" {
				return "the step records", at + ": " + d
			}
			if d := diffValues("Outbox", reflect.ValueOf(orNil(hs.Outbox)), reflect.ValueOf(orNil(rs.Outbox))); d != "" {
				return "the outbox", at + ": " + d
			}
			hb, herr := hs.AppendBinary(nil)
			rb, rerr := rs.AppendBinary(nil)
			if d := diffErrors(herr, rerr); d != "" {
				return "the encoding's error", at + ": " + d
			}
			if !bytes.Equal(hb, rb) {
				d := fmt.Sprintf("%d bytes against %d", len(hb), len(rb))
				var hd, rd saga.State
				if hd.UnmarshalBinary(hb) == nil && rd.UnmarshalBinary(rb) == nil {
					if f := diffState(&hd, &rd); f != "" {
						d = f
					}
				}
				return "the encoded state", at + ": " + d
			}
		}
	}
	return "", ""
}

// callOf is plan.Call, a panic its text.
func callOf(plan *saga.Plan, st *saga.State, now time.Time) (c saga.Call, panicText string, err error) {
	if p := protect(func() { c, err = plan.Call(st, now) }); p != nil {
		return c, fmt.Sprint(p.value), nil
	}
	return c, "", err
}

// advance is plan.Advance, a panic its text.
func advance(plan *saga.Plan, st *saga.State, ev saga.Event) (panicText string, err error) {
	if p := protect(func() { err = plan.Advance(st, ev) }); p != nil {
		return fmt.Sprint(p.value), nil
	}
	return "", err
}

// diffErrors compares two errors as the engine reads them: their text,
// type and whether they are permanent.
func diffErrors(a, b error) string {
	switch {
	case a == nil && b == nil:
		return ""
	case a == nil || b == nil:
		return fmt.Sprintf("held %v, read %v", a, b)
	case a.Error() != b.Error() || saga.ErrorType(a) != saga.ErrorType(b) || saga.IsPermanent(a) != saga.IsPermanent(b) ||
		errors.Is(a, saga.ErrInvalidEvent) != errors.Is(b, saga.ErrInvalidEvent):
		return fmt.Sprintf("held %v (%s, permanent %t), read %v (%s, permanent %t)", a, saga.ErrorType(a), saga.IsPermanent(a), b, saga.ErrorType(b), saga.IsPermanent(b))
	}
	return ""
}

// diffState is where two states differ first, field by field in memory;
// "" when they do not. Aside: Resends, which no transition reads, and nil
// against empty in the state's own lists, which the codec writes entry
// by entry (no entries read back as nil) and the code reads by length; in
// values (vars, outputs, payloads) nil against empty counts.
func diffState(a, b *saga.State) string {
	a2, b2 := *a, *b
	for _, st := range []*saga.State{&a2, &b2} {
		st.Resends = 0
		st.Cursors, st.Stack, st.Outbox, st.Kept = orNil(st.Cursors), orNil(st.Stack), orNil(st.Outbox), orNil(st.Kept)
		st.Seen, st.Inherited, st.Forks, st.UndoNext = orNil(st.Seen), orNil(st.Inherited), orNil(st.Forks), orNil(st.UndoNext)
		st.History, st.Secret = orNil(st.History), orNil(st.Secret)
	}
	return diffValues("State", reflect.ValueOf(a2), reflect.ValueOf(b2))
}

func orNil[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

var timeType = reflect.TypeFor[time.Time]()

// diffValues is where a and b differ first, "" when they do not: their
// types, nil against empty, lengths, map keys, and times, which must be
// Equal and print the same (location and monotonic reading included).
// Unexported fields and functions are not compared.
func diffValues(path string, a, b reflect.Value) string {
	if a.IsValid() != b.IsValid() {
		return fmt.Sprintf("%s: held %s, read %s", path, show(a), show(b))
	}
	if !a.IsValid() {
		return ""
	}
	if a.Type() != b.Type() {
		return fmt.Sprintf("%s: held a %s (%s), read a %s (%s)", path, a.Type(), show(a), b.Type(), show(b))
	}
	if a.Type() == timeType {
		ta, tb := a.Interface().(time.Time), b.Interface().(time.Time)
		if !ta.Equal(tb) || ta.String() != tb.String() {
			return fmt.Sprintf("%s: held %s, read %s", path, ta, tb)
		}
		return ""
	}
	switch a.Kind() {
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return fmt.Sprintf("%s: held %s, read %s", path, show(a), show(b))
		}
		keys := a.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(fmt.Sprint(x), fmt.Sprint(y)) })
		for _, k := range keys {
			bv := b.MapIndex(k)
			if !bv.IsValid() {
				return fmt.Sprintf("%s[%v]: held %s, read none", path, k, show(a.MapIndex(k)))
			}
			if d := diffValues(fmt.Sprintf("%s[%v]", path, k), a.MapIndex(k), bv); d != "" {
				return d
			}
		}
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return fmt.Sprintf("%s: held %s, read %s", path, show(a), show(b))
		}
		fallthrough
	case reflect.Array:
		for i := range a.Len() {
			if d := diffValues(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i)); d != "" {
				return d
			}
		}
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() != b.IsNil() {
			return fmt.Sprintf("%s: held %s, read %s", path, show(a), show(b))
		}
		if !a.IsNil() {
			return diffValues(path, a.Elem(), b.Elem())
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if f := a.Type().Field(i); f.IsExported() {
				if d := diffValues(path+"."+f.Name, a.Field(i), b.Field(i)); d != "" {
					return d
				}
			}
		}
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
	default:
		if a.Interface() != b.Interface() {
			return fmt.Sprintf("%s: held %s, read %s", path, show(a), show(b))
		}
	}
	return ""
}

// show prints a value for a violation, with its type, cut short.
func show(v reflect.Value) string {
	if !v.IsValid() {
		return "nothing"
	}
	var s string
	switch {
	case v.Kind() == reflect.Map && v.IsNil(), v.Kind() == reflect.Slice && v.IsNil():
		s = fmt.Sprintf("nil %s", v.Type())
	case v.Kind() == reflect.Map || v.Kind() == reflect.Slice:
		s = fmt.Sprintf("%s of %d: %#v", v.Type(), v.Len(), v.Interface())
	default:
		s = fmt.Sprintf("%#v", v.Interface())
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// deepCopy copies v's maps, slices and pointers, so that nothing done to
// the copy reaches v, and keeps everything else as it is: times with
// their location and monotonic reading, the number types inside values,
// nil against empty, a slice's capacity, and which maps, slices and
// pointers are shared (a saga's output that is its vars map stays so).
// An encoding round trip would lose exactly what the check looks for.
func deepCopy[T any](v T) T {
	c := copier{seen: map[alias]reflect.Value{}}
	return c.copy(reflect.ValueOf(&v).Elem()).Interface().(T)
}

type copier struct{ seen map[alias]reflect.Value }

// alias identifies a map, slice or pointer: copies of one are one copy.
type alias struct {
	p        unsafe.Pointer
	t        reflect.Type
	len, cap int
}

func (c *copier) copy(v reflect.Value) reflect.Value {
	if v.Type() == timeType {
		return v
	}
	switch v.Kind() {
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		k := alias{p: v.UnsafePointer(), t: v.Type()}
		if m, ok := c.seen[k]; ok {
			return m
		}
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		c.seen[k] = m
		for it := v.MapRange(); it.Next(); {
			m.SetMapIndex(c.copy(it.Key()), c.copy(it.Value()))
		}
		return m
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		k := alias{p: v.UnsafePointer(), t: v.Type(), len: v.Len(), cap: v.Cap()}
		if s, ok := c.seen[k]; ok {
			return s
		}
		s := reflect.MakeSlice(v.Type(), v.Len(), v.Cap())
		c.seen[k] = s
		for i := range v.Len() {
			s.Index(i).Set(c.copy(v.Index(i)))
		}
		return s
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		k := alias{p: v.UnsafePointer(), t: v.Type()}
		if p, ok := c.seen[k]; ok {
			return p
		}
		p := reflect.New(v.Type().Elem())
		c.seen[k] = p
		p.Elem().Set(c.copy(v.Elem()))
		return p
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(c.copy(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v) // unexported fields as they are: the state's types have none
		for i := range v.NumField() {
			if out.Field(i).CanSet() {
				out.Field(i).Set(c.copy(v.Field(i)))
			}
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(c.copy(v.Index(i)))
		}
		return out
	}
	return v
}
