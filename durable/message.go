package durable

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// MaxMessageBytes bounds a message body; real ones are about 100 bytes.
const MaxMessageBytes = 4 << 10

// MaxVersion is the highest version a message may carry. No saga reaches
// it (a transition every nanosecond would take 292 years), and a handler
// adds one to a message's version, which above it could wrap to 0: a
// message with a higher version is malformed, never taken as stale.
const MaxVersion = 1<<63 - 1

// ValidSagaID reports whether id can name a saga: 1 to 128 letters,
// digits, '_', '.', ':' and '-', starting with a letter or digit.
func ValidSagaID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '_' && c != '.' && c != ':' && c != '-')) {
			return false
		}
	}
	return true
}

// AppendMessage appends m's body: a small JSON object. Saga and step ids
// never need escaping (ValidSagaID and step id rules), so it is written by hand.
func AppendMessage(b []byte, m Message) []byte {
	b = append(b, `{"v":1,"saga_id":"`...)
	b = append(b, m.SagaID...)
	b = append(b, `","version":`...)
	b = strconv.AppendUint(b, m.Version, 10)
	b = append(b, `,"queue":"`...)
	b = append(b, m.Queue...)
	b = append(b, `","step":"`...)
	b = append(b, m.Step...)
	b = append(b, `","attempt":`...)
	b = strconv.AppendInt(b, int64(m.Attempt), 10)
	if m.Kind != KindStep {
		b = append(b, `,"kind":"`...)
		b = append(b, m.Kind...)
		b = append(b, '"')
	}
	if m.Child != 0 {
		b = append(b, `,"child":`...)
		b = strconv.AppendInt(b, int64(m.Child), 10)
	}
	return append(b, '}')
}

type messageBody struct {
	V       int    `json:"v"`
	SagaID  string `json:"saga_id"`
	Version uint64 `json:"version"`
	Queue   string `json:"queue"`
	Step    string `json:"step"`
	Attempt int    `json:"attempt"`
	Kind    string `json:"kind"`
	Child   int    `json:"child"`
}

// DecodeMessage parses a message body. Anything that is not a well-formed
// message of a known version is ErrMalformedMessage: it must go to the
// dead-letter queue untouched, never be dropped.
func DecodeMessage(body []byte) (Message, error) {
	if len(body) > MaxMessageBytes {
		return Message{}, fmt.Errorf("%w: %d bytes, over %d", ErrMalformedMessage, len(body), MaxMessageBytes)
	}
	mb, ok := decodeFast(body)
	if !ok {
		slow := new(messageBody) // its own variable: taking mb's address would move mb to the heap on the fast path too
		if err := json.Unmarshal(body, slow); err != nil {
			return Message{}, fmt.Errorf("%w: %v", ErrMalformedMessage, err)
		}
		mb = *slow
	}
	switch {
	case mb.V != 1:
		return Message{}, fmt.Errorf("%w: unknown message version %d", ErrMalformedMessage, mb.V)
	case !ValidSagaID(mb.SagaID):
		return Message{}, fmt.Errorf("%w: bad saga_id %q", ErrMalformedMessage, mb.SagaID)
	case mb.Version == 0:
		return Message{}, fmt.Errorf("%w: missing version", ErrMalformedMessage)
	case mb.Version > MaxVersion:
		return Message{}, fmt.Errorf("%w: version past %d, which no saga reaches", ErrMalformedMessage, uint64(MaxVersion))
	case mb.Queue != string(QueueAdvance) && mb.Queue != string(QueueCompensate):
		return Message{}, fmt.Errorf("%w: unknown queue %q", ErrMalformedMessage, mb.Queue)
	case mb.Attempt < 1:
		return Message{}, fmt.Errorf("%w: attempt %d", ErrMalformedMessage, mb.Attempt)
	case !knownKind(mb.Kind):
		return Message{}, fmt.Errorf("%w: unknown kind %q", ErrMalformedMessage, mb.Kind)
	case mb.Child != 0 && mb.Kind != string(KindLaunch) && mb.Kind != string(KindExpire), mb.Child < 0, mb.Child >= MaxForkChildren:
		return Message{}, fmt.Errorf("%w: child %d with kind %q", ErrMalformedMessage, mb.Child, mb.Kind)
	}
	return Message{SagaID: mb.SagaID, Version: mb.Version, Queue: QueueName(mb.Queue), Step: mb.Step, Attempt: mb.Attempt, Kind: MessageKind(mb.Kind), Child: mb.Child}, nil
}

func knownKind(k string) bool {
	switch MessageKind(k) {
	case KindStep, KindLaunch, KindEnded, KindJoin, KindUndo, KindStop, KindExpire:
		return true
	}
	return false
}

// decodeFast parses the common shape of a message body: one flat JSON
// object whose values are plain ASCII strings without escapes or
// non-negative integers. Anything else reports false, and the caller falls
// back to encoding/json, so both paths accept and reject alike (a fuzz test
// holds them to it).
func decodeFast(b []byte) (mb messageBody, ok bool) {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return mb, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return mb, skipSpace(b, i+1) == len(b)
	}
	for {
		var key, str []byte
		var num uint64
		isNum := false
		if key, i, ok = fastString(b, i); !ok {
			return mb, false
		}
		i = skipSpace(b, i)
		if i == len(b) || b[i] != ':' {
			return mb, false
		}
		i = skipSpace(b, i+1)
		if i == len(b) {
			return mb, false
		}
		if b[i] == '"' {
			if str, i, ok = fastString(b, i); !ok {
				return mb, false
			}
		} else {
			if num, i, ok = fastUint(b, i); !ok {
				return mb, false
			}
			isNum = true
		}
		switch string(key) {
		case "v":
			if !isNum || num > 1<<31 {
				return mb, false
			}
			mb.V = int(num)
		case "version":
			if !isNum {
				return mb, false
			}
			mb.Version = num
		case "attempt":
			if !isNum || num > 1<<31 {
				return mb, false
			}
			mb.Attempt = int(num)
		case "saga_id":
			if isNum {
				return mb, false
			}
			mb.SagaID = string(str)
		case "queue":
			if isNum {
				return mb, false
			}
			switch string(str) {
			case string(QueueAdvance):
				mb.Queue = string(QueueAdvance)
			case string(QueueCompensate):
				mb.Queue = string(QueueCompensate)
			default:
				mb.Queue = string(str)
			}
		case "step":
			if isNum {
				return mb, false
			}
			mb.Step = string(str)
		case "kind":
			if isNum {
				return mb, false
			}
			mb.Kind = string(str)
		case "child":
			if !isNum || num > 1<<31 {
				return mb, false
			}
			mb.Child = int(num)
		default:
			// encoding/json matches keys case-insensitively; leave those to it.
			return mb, false
		}
		i = skipSpace(b, i)
		if i == len(b) {
			return mb, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return mb, skipSpace(b, i+1) == len(b)
		default:
			return mb, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// fastString reads a string of printable ASCII without escapes.
func fastString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	start := i + 1
	for j := start; j < len(b); j++ {
		c := b[j]
		switch {
		case c == '"':
			return b[start:j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, j, false
		}
	}
	return nil, len(b), false
}

// fastUint reads a non-negative integer without sign, fraction or exponent.
func fastUint(b []byte, i int) (uint64, int, bool) {
	start := i
	var n uint64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if i-start >= 19 {
			return 0, i, false
		}
		n = n*10 + uint64(b[i]-'0')
		i++
	}
	if i == start || (b[start] == '0' && i-start > 1) {
		return 0, i, false
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, i, false
	}
	return n, i, true
}

// ChildID is the id of child index of the fork that step made at visit
// of saga parentID: "<parent>.<step>.<visit>.<index>", or, when that would
// be longer than a saga id may be, "c" and 40 hex digits of its SHA-256
// followed by ".<index>". Derived, so that launching a child twice
// creates it once.
func ChildID(parentID, step string, visit uint64, index int) string {
	id := parentID + "." + step + "." + strconv.FormatUint(visit, 10) + "." + strconv.Itoa(index)
	if len(id) <= 128 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "c" + hex.EncodeToString(sum[:20]) + "." + strconv.Itoa(index)
}

// IsChildID reports whether id has the form ChildID gives a child run:
// "<parent>.<step>.<visit>.<index>" with a step id (a letter, then
// letters, digits and '_') and two numbers, or "c" and 40 hex digits then
// ".<index>". A saga a user starts may not have one, so that no saga can
// take a child's id.
func IsChildID(id string) bool {
	parts := strings.Split(id, ".")
	n := len(parts)
	digits := func(s string) bool {
		if s == "" {
			return false
		}
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	if n == 2 && len(parts[0]) == 41 && parts[0][0] == 'c' && digits(parts[1]) {
		_, err := hex.DecodeString(parts[0][1:])
		return err == nil
	}
	if n < 4 || !digits(parts[n-1]) || !digits(parts[n-2]) {
		return false
	}
	step := parts[n-3]
	if step == "" || !(step[0] >= 'a' && step[0] <= 'z' || step[0] >= 'A' && step[0] <= 'Z') {
		return false
	}
	for i := 0; i < len(step); i++ {
		c := step[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
