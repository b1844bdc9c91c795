package saga

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/lang"
)

// Errors of deliveries a saga refuses. Each leaves the saga unchanged.
var (
	// ErrNotReceiving: the saga is compensating or final, and takes no
	// signal or callback.
	ErrNotReceiving = errors.New("the saga takes no deliveries")
	// ErrKeptFull: the saga keeps as many early signals as it may
	// (lang.MaxKeptSignals, lang.MaxKeptSignalBytes).
	ErrKeptFull = errors.New("the saga keeps no more signals")
	// ErrBadToken: a callback token that is malformed, or was not issued
	// by the saga it names.
	ErrBadToken = errors.New("invalid callback token")
	// ErrTokenNotAwaited: a genuine token whose attempt the saga no longer
	// waits on (an earlier visit or attempt, timed out, or completed).
	ErrTokenNotAwaited = errors.New("callback token not awaited")
	// ErrBadDelivery: a delivery that can never be taken (its payload is
	// not plain values, too large, or its id or name is malformed).
	ErrBadDelivery = errors.New("invalid delivery")
)

// Receipt says what Receive did with a delivery.
type Receipt string

const (
	ReceiptApplied   Receipt = "applied"   // a transition: the await or callback it completes went on
	ReceiptKept      Receipt = "kept"      // kept for the await (or action) that will take it; the version stays
	ReceiptDuplicate Receipt = "duplicate" // a delivery of this id was applied or kept already: nothing changed
)

const (
	// MaxDeliveryIDBytes bounds the id a sender gives a signal.
	MaxDeliveryIDBytes = 64
	// maxSeen is how many delivery ids a saga remembers to drop repeats.
	maxSeen = 32
	// secretBytes is the length of State.Secret.
	secretBytes = 16
	// tokenMACBytes is the length of a token's authenticator.
	tokenMACBytes = 16
	tokenPrefix   = "lscb1_"
)

var deliveryIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// ValidDeliveryID reports whether id can be a delivery's id (a signal's
// idempotency id): DeliveryIDRule.
func ValidDeliveryID(id string) bool { return deliveryIDPattern.MatchString(id) }

// DeliveryIDRule says what a delivery id may hold, for errors.
const DeliveryIDRule = "1 to 64 letters, digits, '_', '.', ':' or '-'"

// HasCallbacks reports whether the plan has callback steps: its sagas need
// Event.Secret at their start.
func (p *Plan) HasCallbacks() bool { return p.callbacks }

// CallbackToken is the token of the saga's pending callback attempt: the
// saga's id, the step, the visit and the attempt, authenticated with the
// saga's secret. Empty when the pending cursor is no callback step's.
func (p *Plan) CallbackToken(st *State) string {
	cur, ok := st.Pending()
	if !ok || cur.Compensating {
		return ""
	}
	return p.callbackTokenFor(st, cur.Step, cur.Seq, cur.Attempt)
}

// callbackTokenFor is the token of a callback step's attempt.
func (p *Plan) callbackTokenFor(st *State, step int, seq uint64, attempt int) string {
	if step < 0 || step >= len(p.steps) || p.steps[step].Callback == nil || len(st.Secret) == 0 {
		return ""
	}
	b := binary.AppendUvarint(nil, uint64(len(st.SagaID)))
	b = append(b, st.SagaID...)
	b = binary.AppendUvarint(b, uint64(step))
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(attempt))
	b = append(b, tokenMAC(st.Secret, st.SagaID, step, seq, attempt)...)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

func tokenMAC(secret []byte, sagaID string, step int, seq uint64, attempt int) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("lambdasaga callback\x00"))
	m.Write([]byte(sagaID))
	var b [3 * binary.MaxVarintLen64]byte
	n := binary.PutUvarint(b[:], uint64(step))
	n += binary.PutUvarint(b[n:], seq)
	n += binary.PutUvarint(b[n:], uint64(attempt))
	m.Write([]byte{0})
	m.Write(b[:n])
	return m.Sum(nil)[:tokenMACBytes]
}

// CallbackRef is what a callback token names.
type CallbackRef struct {
	SagaID  string // the saga that issued the token
	Step    int    // the step's index in the plan
	Seq     uint64 // the visit
	Attempt int    // the attempt, from 1
	mac     []byte
}

// ParseCallbackToken reads the saga, step, visit and attempt a token
// names. It does not check the token against the saga: Receive does.
func ParseCallbackToken(token string) (CallbackRef, error) {
	bad := func(why string) (CallbackRef, error) {
		return CallbackRef{}, fmt.Errorf("%w: %s", ErrBadToken, why)
	}
	rest, ok := cutPrefix(token, tokenPrefix)
	if !ok {
		return bad("it does not start with " + tokenPrefix)
	}
	if len(rest) > 512 {
		return bad("it is too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return bad("it is not base64url")
	}
	var ref CallbackRef
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return bad("its saga id is cut short")
	}
	ref.SagaID, b = string(b[w:w+int(n)]), b[w+int(n):]
	var vals [3]uint64
	for i := range vals {
		v, w := binary.Uvarint(b)
		if w <= 0 || v > 1<<31 && i != 1 {
			return bad("its step, visit or attempt is damaged")
		}
		vals[i], b = v, b[w:]
	}
	if len(b) != tokenMACBytes {
		return bad("its authenticator has the wrong length")
	}
	ref.Step, ref.Seq, ref.Attempt, ref.mac = int(vals[0]), vals[1], int(vals[2]), b
	if !durable.ValidSagaID(ref.SagaID) {
		return bad("its saga id is invalid")
	}
	return ref, nil
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || s[:len(prefix)] != prefix {
		return s, false
	}
	return s[len(prefix):], true
}

// tokenID is the id a callback's completion is remembered by in Seen.
func tokenID(mac []byte) string { return "cb:" + hex.EncodeToString(mac[:8]) }

// CheckDelivery checks what a sender gives before any saga is read: the
// payload made of plain values within lang.MaxSignalBytes (its JSON size,
// measured by the caller, is jsonBytes), the signal's name, the id.
func CheckDelivery(d *Delivery, jsonBytes int) error { return CheckDeliveryWithin(d, jsonBytes, 0) }

// CheckDeliveryWithin is CheckDelivery for an engine that keeps values
// over offloadBytes as objects (Event.OffloadBytes): when it is positive,
// a payload may be as large as an object (MaxValueBytes as JSON).
func CheckDeliveryWithin(d *Delivery, jsonBytes, offloadBytes int) error {
	maxBytes := lang.MaxSignalBytes
	if offloadBytes > 0 {
		maxBytes = MaxValueBytes
	}
	if d.Token == "" && !lang.SignalNamePattern.MatchString(d.Signal) {
		return fmt.Errorf("%w: signal name %q: %s", ErrBadDelivery, d.Signal, lang.SignalNameRule)
	}
	if d.ID != "" && !deliveryIDPattern.MatchString(d.ID) {
		return fmt.Errorf("%w: id: letters, digits, '_', '.', ':' or '-', at most %d", ErrBadDelivery, MaxDeliveryIDBytes)
	}
	if jsonBytes > maxBytes {
		return fmt.Errorf("%w: payload is %d bytes of JSON, over the limit of %d", ErrBadDelivery, jsonBytes, maxBytes)
	}
	v, err := CheckValue(d.Payload)
	if err != nil {
		return fmt.Errorf("%w: payload: %w", ErrBadDelivery, err)
	}
	d.Payload = v
	if d.Err != nil {
		d.Err = newStepError("", d.Err.Type, d.Err.Message)
		if d.Err.Type == "" {
			return fmt.Errorf("%w: a failed callback needs an error type", ErrBadDelivery)
		}
	}
	return nil
}

// Receive gives the saga a delivery: a signal (Delivery.Signal) or a
// callback token's completion (Delivery.Token). When the saga waits for
// it, Receive applies it as a transition, as Advance does (ev.Kind is set
// to EventSignal or EventCallback): write it conditionally on the version
// read, and send its outbox. When the saga will wait for it later (a
// signal no await waits on yet; a completion of a token whose action still
// runs), Receive keeps it: the version stays, Received goes up by one, and
// the write is conditional on both. A repeat of a delivery already taken
// changes nothing. Anything else is an error and changes nothing. The
// delivery must have passed CheckDelivery.
func (p *Plan) Receive(st *State, ev *Event) (Receipt, error) {
	if st.DefinitionHash != "" && st.DefinitionHash != p.hash {
		return "", fmt.Errorf("%w: saga %s runs definition %s, not %s", ErrInvalidEvent, st.SagaID, st.DefinitionHash, p.hash)
	}
	d := &ev.Delivery
	what := "signal " + d.Signal
	if d.Token == "" && d.Signal == "" {
		return "", fmt.Errorf("%w: neither a signal's name nor a callback token", ErrBadDelivery)
	}
	if d.Token != "" {
		ref, err := ParseCallbackToken(d.Token)
		if err != nil {
			return "", err
		}
		if ref.SagaID != st.SagaID || ref.Step >= len(p.steps) || p.steps[ref.Step].Callback == nil || len(st.Secret) == 0 ||
			!hmac.Equal(ref.mac, tokenMAC(st.Secret, st.SagaID, ref.Step, ref.Seq, ref.Attempt)) {
			return "", fmt.Errorf("%w: saga %s issued no such token", ErrBadToken, st.SagaID)
		}
		d.Step, d.Seq, d.Attempt, d.ID = ref.Step, ref.Seq, ref.Attempt, tokenID(ref.mac)
		what = fmt.Sprintf("callback of step %s (visit %d, attempt %d)", p.steps[ref.Step].ID, ref.Seq, ref.Attempt)
	}
	if d.ID != "" && containsString(st.Seen, d.ID) {
		return ReceiptDuplicate, nil
	}
	// A held saga keeps a signal, as a running one does, for an await
	// after its retry; a callback token of the attempt it is held on
	// named a failed attempt.
	heldSignal := st.Status == durable.StatusHeld && d.Token == ""
	if st.Status != durable.StatusRunning && st.Status != durable.StatusWaiting && !heldSignal {
		return "", fmt.Errorf("%w: saga %s is %s: %s not taken", ErrNotReceiving, st.SagaID, st.Status, what)
	}
	cur, pending := st.Pending()
	if d.Token != "" {
		if !pending || cur.Compensating || cur.Step != d.Step || cur.Seq != d.Seq || cur.Attempt != d.Attempt {
			return "", fmt.Errorf("%w: saga %s does not wait on this %s: %s", ErrTokenNotAwaited, st.SagaID, what, p.waitsOn(st))
		}
		if cur.Wait && st.Status == durable.StatusWaiting {
			ev.Kind = EventCallback
			return ReceiptApplied, p.Advance(st, *ev)
		}
		if st.CancelRequested {
			return "", fmt.Errorf("%w: saga %s is cancelled: %s not taken (the step is compensated once its action returns)", ErrNotReceiving, st.SagaID, what)
		}
		return p.keep(st, ev)
	}
	if pending && cur.Wait && st.Status == durable.StatusWaiting && p.steps[cur.Step].Kind == lang.KindAwait && p.steps[cur.Step].Await.Signal == d.Signal {
		ev.Kind = EventSignal
		return ReceiptApplied, p.Advance(st, *ev)
	}
	if st.CancelRequested {
		return "", fmt.Errorf("%w: saga %s is cancelled: %s not taken", ErrNotReceiving, st.SagaID, what)
	}
	if !p.RouteSignal(st, d.Signal).Anywhere {
		return "", notAwaited(st, d.Signal)
	}
	// Kept until an await takes it: one of the saga's own, or, for a
	// signal only a fork's children await, the first child that may
	// take it, given it as it starts (HandedTo). A child already running
	// is given it by the coordinator (engine, deliver), not kept here.
	return p.keep(st, ev)
}

// waitsOn says, for an error, what the saga waits on.
func (p *Plan) waitsOn(st *State) string {
	cur, ok := st.Pending()
	if !ok {
		return "it waits on nothing"
	}
	s := p.steps[cur.Step]
	switch {
	case cur.Compensating:
		return fmt.Sprintf("it compensates step %s", s.ID)
	case s.Callback != nil && cur.Wait:
		return fmt.Sprintf("it waits on the callback of step %s, visit %d, attempt %d", s.ID, cur.Seq, cur.Attempt)
	case cur.Wait:
		return fmt.Sprintf("it waits at step %s", s.ID)
	}
	return fmt.Sprintf("it runs step %s, visit %d, attempt %d", s.ID, cur.Seq, cur.Attempt)
}

// keep adds d to the saga's kept deliveries, within their limits: a
// payload kept as an object (offloadBytes, Event.OffloadBytes) counts as
// its reference.
func keep(st *State, d Delivery, offloadBytes int) error {
	if len(st.Kept) >= lang.MaxKeptSignals {
		return fmt.Errorf("%w: saga %s keeps %d deliveries that nothing has waited for yet, its limit", ErrKeptFull, st.SagaID, len(st.Kept))
	}
	size := keptBytes(d, offloadBytes)
	for _, k := range st.Kept {
		size += keptBytes(k, offloadBytes)
	}
	if size > lang.MaxKeptSignalBytes {
		return fmt.Errorf("%w: saga %s would keep %d bytes of deliveries that nothing has waited for yet, over its limit of %d", ErrKeptFull, st.SagaID, size, lang.MaxKeptSignalBytes)
	}
	d.Token = "" // a callback's is kept as its step, visit and attempt
	st.Kept = append(st.Kept, d)
	st.Received++
	remember(st, d.ID)
	return nil
}

// keep keeps ev's delivery, and says so in the saga's history.
func (p *Plan) keep(st *State, ev *Event) (Receipt, error) {
	if err := keep(st, ev.Delivery, ev.OffloadBytes); err != nil {
		return "", err
	}
	p.historyKept(st, ev)
	return ReceiptKept, nil
}

// keptBytes is what d takes in the encoded state.
func keptBytes(d Delivery, offloadBytes int) int {
	e := encoder{}
	if offloadBytes > 0 {
		e.off = &Offload{Bytes: offloadBytes, measure: true}
	}
	e.delivery(1, d)
	return len(e.b)
}

func remember(st *State, id string) {
	if id == "" {
		return
	}
	if len(st.Seen) >= maxSeen {
		st.Seen = append(st.Seen[:0], st.Seen[len(st.Seen)-maxSeen+1:]...)
	}
	st.Seen = append(st.Seen, id)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// takeSignal removes and returns the first kept signal of that name.
func takeSignal(st *State, name string) (Delivery, bool) {
	for i, d := range st.Kept {
		if d.Signal == name {
			st.Kept = append(st.Kept[:i], st.Kept[i+1:]...)
			return d, true
		}
	}
	return Delivery{}, false
}

// takeCallback removes the kept completions of the callback attempt cur
// (and of any attempt of that step before it), returning the attempt's.
func takeCallback(st *State, cur Cursor) (Delivery, bool) {
	var found Delivery
	ok := false
	kept := st.Kept[:0]
	for _, d := range st.Kept {
		if d.Signal == "" && d.Step == cur.Step && d.Seq <= cur.Seq {
			if d.Seq == cur.Seq && d.Attempt == cur.Attempt && !ok {
				found, ok = d, true
			}
			continue
		}
		kept = append(kept, d)
	}
	clear(st.Kept[len(kept):])
	st.Kept = kept
	return found, ok
}
