package durable_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/lambdasaga/lambdasaga/durable"
)

func TestMessageRoundTrip(t *testing.T) {
	t.Parallel()
	m := durable.Message{SagaID: "order:2026-11-30.a_b", Version: durable.MaxVersion, Queue: durable.QueueCompensate, Step: "charge.card", Attempt: 12}
	got, err := durable.DecodeMessage(durable.AppendMessage(nil, m))
	if err != nil || got != m {
		t.Fatalf("got %+v %v", got, err)
	}
	// The body is ordinary JSON.
	var v map[string]any
	if err := json.Unmarshal(durable.AppendMessage(nil, m), &v); err != nil || v["step"] != "charge.card" {
		t.Fatalf("%v %v", v, err)
	}
}

func TestDecodeMessageRejects(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		``, `null`, `[]`, `{}`, `{"v":1}`, `not json`,
		`{"v":1,"saga_id":"s","version":0,"queue":"advance","step":"a","attempt":1}`,
		`{"v":1,"saga_id":"s","version":1,"queue":"elsewhere","step":"a","attempt":1}`,
		`{"v":1,"saga_id":"s","version":1,"queue":"advance","step":"a","attempt":0}`,
		`{"v":1,"saga_id":"","version":1,"queue":"advance","step":"a","attempt":1}`,
		`{"v":1,"saga_id":"s","version":-1,"queue":"advance","step":"a","attempt":1}`,
		`{"v":1,"saga_id":"s","version":"1","queue":"advance","step":"a","attempt":1}`,
		`{"v":1,"saga_id":"s","version":1,"queue":"advance","step":"a","attempt":1} trailing`,
	} {
		if _, err := durable.DecodeMessage([]byte(body)); !errors.Is(err, durable.ErrMalformedMessage) {
			t.Errorf("%q: %v, want ErrMalformedMessage", body, err)
		}
	}
	// A version no saga can reach is malformed, not stale: the coordinator
	// adds one to it, and 2^64-1 + 1 would wrap to 0 and drop the message.
	for _, v := range []string{"9223372036854775808", "18446744073709551615"} {
		for _, body := range []string{
			`{"v":1,"saga_id":"s","version":` + v + `,"queue":"advance","step":"a","attempt":1}`,
			` {"version":` + v + `, "v":1,"saga_id":"s","queue":"advance","step":"a","attempt":1,"x":null}`, // the slow path
		} {
			if _, err := durable.DecodeMessage([]byte(body)); !errors.Is(err, durable.ErrMalformedMessage) {
				t.Errorf("%s: %v, want ErrMalformedMessage", body, err)
			}
		}
	}
	if m, err := durable.DecodeMessage([]byte(`{"v":1,"saga_id":"s","version":9223372036854775807,"queue":"advance","step":"a","attempt":1}`)); err != nil || m.Version != durable.MaxVersion {
		t.Errorf("version 2^63-1: %+v %v", m, err)
	}
	// Unusual but valid JSON takes the slow path and still decodes.
	m, err := durable.DecodeMessage([]byte(` { "attempt" : 2 , "v":1, "saga_id":"s\u002d1", "version":3, "queue":"advance", "step":"a", "extra": {"x": [1]}} `))
	if err != nil || m.SagaID != "s-1" || m.Version != 3 || m.Attempt != 2 {
		t.Fatalf("%+v %v", m, err)
	}
}

// FuzzDecodeMessage holds the fast path to encoding/json's answers.
func FuzzDecodeMessage(f *testing.F) {
	f.Add([]byte(`{"v":1,"saga_id":"s-1","version":3,"queue":"advance","step":"charge","attempt":1}`))
	f.Add([]byte(`{"v":1,"saga_id":"s-1","version":3,"queue":"compensate","step":"x","attempt":2,"step":"y"}`))
	f.Add([]byte(`{"v":1,"saga_id":"s-1","version":3,"queue":"advance","step":"x","attempt":1,"kind":"launch","child":12}`))
	f.Add([]byte(`{"v":1,"saga_id":"s-1","version":3,"queue":"advance","step":"x","attempt":1,"kind":"ended"}`))
	f.Add([]byte(`{"V":1,"saga_id":"s","version":1,"queue":"advance","step":"a","attempt":1}`))
	f.Add([]byte(`{"v":1,"saga_id":"s","version":18446744073709551615,"queue":"advance","step":"a","attempt":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := durable.DecodeMessage(body)
		want, werr := decodeWithJSON(body)
		if (err == nil) != (werr == nil) {
			t.Fatalf("fast %v, encoding/json %v", err, werr)
		}
		if err == nil && got != want {
			t.Fatalf("fast %+v, encoding/json %+v", got, want)
		}
	})
}

// decodeWithJSON is the reference: encoding/json and the same checks.
func decodeWithJSON(body []byte) (durable.Message, error) {
	var mb struct {
		V       int    `json:"v"`
		SagaID  string `json:"saga_id"`
		Version uint64 `json:"version"`
		Queue   string `json:"queue"`
		Step    string `json:"step"`
		Attempt int    `json:"attempt"`
		Kind    string `json:"kind"`
		Child   int    `json:"child"`
	}
	if len(body) > durable.MaxMessageBytes {
		return durable.Message{}, errors.New("too large")
	}
	if err := json.Unmarshal(body, &mb); err != nil {
		return durable.Message{}, err
	}
	if mb.V != 1 || !durable.ValidSagaID(mb.SagaID) || mb.Version == 0 || mb.Version > durable.MaxVersion || (mb.Queue != "advance" && mb.Queue != "compensate") || mb.Attempt < 1 {
		return durable.Message{}, errors.New("invalid")
	}
	if k := mb.Kind; k != "" && k != "launch" && k != "ended" && k != "join" && k != "undo" && k != "stop" && k != "expire" || mb.Child < 0 || mb.Child >= durable.MaxForkChildren || mb.Child != 0 && k != "launch" && k != "expire" {
		return durable.Message{}, errors.New("invalid")
	}
	return durable.Message{SagaID: mb.SagaID, Version: mb.Version, Queue: durable.QueueName(mb.Queue), Step: mb.Step, Attempt: mb.Attempt, Kind: durable.MessageKind(mb.Kind), Child: mb.Child}, nil
}

func TestValidSagaID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"o-1": true, "A": true, "9": true, "order:2026.11_30-x": true, string(make([]byte, 128)): false,
		"": false, "-a": false, "_a": false, "a b": false, "a/b": false, "ä": false, "a\n": false,
		"a" + string(bytesOf('b', 127)): true, "a" + string(bytesOf('b', 128)): false,
	} {
		if got := durable.ValidSagaID(id); got != want {
			t.Errorf("ValidSagaID(%q) = %v, want %v", id, got, want)
		}
	}
}

func bytesOf(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}
