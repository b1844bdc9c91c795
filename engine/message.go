package engine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
)

// MaxMessageBytes bounds a message body; real ones are about 100 bytes.
const MaxMessageBytes = 4 << 10

var sagaIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// ValidSagaID reports whether id can name a saga: 1 to 128 letters,
// digits, '_', '.', ':' and '-', starting with a letter or digit.
func ValidSagaID(id string) bool { return sagaIDPattern.MatchString(id) }

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
	return append(b, '}')
}

type messageBody struct {
	V       int    `json:"v"`
	SagaID  string `json:"saga_id"`
	Version uint64 `json:"version"`
	Queue   string `json:"queue"`
	Step    string `json:"step"`
	Attempt int    `json:"attempt"`
}

// DecodeMessage parses a message body. Anything that is not a well-formed
// message of a known version is ErrMalformedMessage: it must go to the
// dead-letter queue untouched, never be dropped.
func DecodeMessage(body []byte) (Message, error) {
	if len(body) > MaxMessageBytes {
		return Message{}, fmt.Errorf("%w: %d bytes, over %d", ErrMalformedMessage, len(body), MaxMessageBytes)
	}
	var mb messageBody
	if err := json.Unmarshal(body, &mb); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrMalformedMessage, err)
	}
	switch {
	case mb.V != 1:
		return Message{}, fmt.Errorf("%w: unknown message version %d", ErrMalformedMessage, mb.V)
	case !ValidSagaID(mb.SagaID):
		return Message{}, fmt.Errorf("%w: bad saga_id %q", ErrMalformedMessage, mb.SagaID)
	case mb.Version == 0:
		return Message{}, fmt.Errorf("%w: missing version", ErrMalformedMessage)
	case mb.Queue != string(QueueAdvance) && mb.Queue != string(QueueCompensate):
		return Message{}, fmt.Errorf("%w: unknown queue %q", ErrMalformedMessage, mb.Queue)
	case mb.Attempt < 1:
		return Message{}, fmt.Errorf("%w: attempt %d", ErrMalformedMessage, mb.Attempt)
	}
	return Message{SagaID: mb.SagaID, Version: mb.Version, Queue: QueueName(mb.Queue), Step: mb.Step, Attempt: mb.Attempt}, nil
}
