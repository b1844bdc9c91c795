package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/chaos"
	"github.com/lambdasaga/lambdasaga/internal/engine"
	"github.com/lambdasaga/lambdasaga/internal/saga"
)

// newTestLedger makes a ledger table of the test's own on the emulator
// (skipping the test without one), publishing tokens in tokenDir, and a
// registry with its actions.
func newTestLedger(t *testing.T, tokenDir string) (*chaos.Ledger, *engine.Registry) {
	t.Helper()
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	l := &chaos.Ledger{Client: awslocal.DynamoDB(dyn), Table: "ledger-test-" + t.Name(), TokenDir: tokenDir}
	if err := l.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry()
	l.Register(reg)
	return l, reg
}

// The ledger records an effect once per key and counts every call: the kill
// test's duplicate figure depends on it.
func TestLedgerCountsDuplicateCalls(t *testing.T) {
	ctx := context.Background()
	l, reg := newTestLedger(t, "")
	call := saga.Call{SagaID: "s", Step: "a", Action: "ledger.do", Attempt: 1, IdempotencyKey: "s/a/1", Input: map[string]any{"fail": false}}
	for range 3 {
		if _, err := reg.Invoke(ctx, call); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := l.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries["s"]) != 1 || entries["s"][0].Calls != 3 || entries["s"][0].Phase != "do" || entries["s"][0].Seq != 1 {
		t.Fatalf("ledger %+v, want one effect with 3 calls and sequence 1", entries)
	}
}

// A call with a callback token publishes it where the kill test's driver
// reads it, and the effect keeps the first call's note.
func TestLedgerPublishesTokensAndNotes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, reg := newTestLedger(t, dir)
	for i, note := range []string{"first", "second"} {
		call := saga.Call{SagaID: "s", Step: "c", Action: "ledger.do", Attempt: i + 1, IdempotencyKey: "s/c/1", CallbackToken: "lscb1_" + note, Input: map[string]any{"note": note}}
		if _, err := reg.Invoke(ctx, call); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []string{"lscb1_first", "lscb1_second"} {
		got, err := os.ReadFile(chaos.TokenFile(dir, "s", i+1))
		if err != nil || string(got) != want {
			t.Errorf("attempt %d's token file holds %q (%v), want %q", i+1, got, err, want)
		}
	}
	entries, err := l.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries["s"]) != 1 || entries["s"][0].Note != "first" || entries["s"][0].Calls != 2 {
		t.Fatalf("ledger %+v, want one effect, 2 calls, noted %q", entries, "first")
	}
}

// ledger.do returns its input's echo (the output a fork's join puts in
// order); the travel actions record each effect with a note naming it,
// undos as undos, and refuse a trip whose car is sold out before any
// effect.
func TestLedgerEchoesAndRecordsTravel(t *testing.T) {
	ctx := context.Background()
	l, reg := newTestLedger(t, "")
	l.RegisterTravel(reg)
	out, err := reg.Invoke(ctx, saga.Call{SagaID: "f", Step: "p1", Action: "ledger.do", Attempt: 1, IdempotencyKey: "f/p1/1", Input: map[string]any{"echo": "p1"}})
	if err != nil || out != "p1" {
		t.Fatalf("ledger.do with echo returned %v, %v; want p1", out, err)
	}
	calls := []saga.Call{
		{SagaID: "t.book.1.0", Step: "hotel", Action: "hotels.book", IdempotencyKey: "k1", Input: map[string]any{"trip_id": "t", "city": "Lisbon"}},
		{SagaID: "t.book.1.0", Step: "hotel", Action: "hotels.cancel", IdempotencyKey: "k2", Compensation: true, Input: map[string]any{"trip_id": "t"}},
		{SagaID: "t.tickets.3.2", Step: "ticket", Action: "tickets.issue", IdempotencyKey: "k3", Input: map[string]any{"trip_id": "t", "name": "cy", "seat": 2, "to": "Lisbon"}},
	}
	for _, c := range calls {
		c.Attempt = 1
		if _, err := reg.Invoke(ctx, c); err != nil {
			t.Fatalf("%s: %v", c.Action, err)
		}
	}
	if _, err := reg.Invoke(ctx, saga.Call{SagaID: "u.book.1.2", Step: "car", Action: "cars.book", Attempt: 1, IdempotencyKey: "k4", Input: map[string]any{"trip_id": "u" + chaos.NoCarSuffix}}); !saga.IsPermanent(err) {
		t.Errorf("cars.book of a trip with no car: %v, want a permanent error", err)
	}
	entries, err := l.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, id := range []string{"t.book.1.0", "t.tickets.3.2", "u.book.1.2"} {
		for _, e := range entries[id] {
			got = append(got, fmt.Sprintf("%s %s %s %v", e.Saga, e.Phase, e.Note, e.Returned))
		}
	}
	slices.Sort(got)
	want := []string{"t.book.1.0 do hotels.book t true", "t.book.1.0 undo hotels.cancel t false", "t.tickets.3.2 do tickets.issue t 2 cy true"}
	if !slices.Equal(got, want) {
		t.Errorf("ledger %q, want %q", got, want)
	}
}

// ledger.do with a size returns a large output, the same for every call
// under a key, and notes what it received in check as a fingerprint;
// ledger.undo notes its check likewise, so that a test sees that a
// compensation got large values whole.
func TestLedgerMakesLargeOutputsAndNotesWhatItGot(t *testing.T) {
	ctx := context.Background()
	l, reg := newTestLedger(t, "")
	doc := strings.Repeat("d", 100_000)
	do := saga.Call{SagaID: "s", Step: "a", Action: "ledger.do", Attempt: 1, IdempotencyKey: "s/a/1", Input: map[string]any{"size": int64(300_000), "check": doc}}
	var outs []any
	for range 2 {
		out, err := reg.Invoke(ctx, do)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out)
	}
	blob, _ := outs[0].(map[string]any)["blob"].(string)
	if len(blob) != 300_000 || blob != chaos.LargeOutput("s", "a", 300_000) || !reflect.DeepEqual(outs[0], outs[1]) {
		t.Fatalf("ledger.do's output: %d bytes, the same twice %v; want LargeOutput of 300,000 bytes each call", len(blob), reflect.DeepEqual(outs[0], outs[1]))
	}
	undo := saga.Call{SagaID: "s", Step: "a", Action: "ledger.undo", Compensation: true, Attempt: 1, IdempotencyKey: "s/a.compensate/1", Input: map[string]any{"check": []any{doc, outs[0]}}}
	if _, err := reg.Invoke(ctx, undo); err != nil {
		t.Fatal(err)
	}
	entries, err := l.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	notes := map[string]string{}
	for _, e := range entries["s"] {
		notes[e.Phase] = e.Note
	}
	want := map[string]string{"do": chaos.Fingerprint(doc), "undo": chaos.Fingerprint([]any{doc, outs[0]})}
	if !reflect.DeepEqual(notes, want) || chaos.Fingerprint(doc) == chaos.Fingerprint(doc[1:]) {
		t.Fatalf("notes %q, want %q", notes, want)
	}
}

// A broken step refuses, retryably, and records each refusal under its
// key with its attempt, apart from any effect, until it is fixed; then it
// applies its effect under the same key, the attempt recorded with it.
func TestLedgerRefusesABrokenStepUntilFixed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, reg := newTestLedger(t, dir)
	call := saga.Call{SagaID: "s", Step: "h", Action: "ledger.do", IdempotencyKey: "s/h/1", Input: map[string]any{"broken": true}}
	for a := 1; a <= 2; a++ {
		call.Attempt = a
		_, err := reg.Invoke(ctx, call)
		var ae *saga.ActionError
		if !errors.As(err, &ae) || ae.Type != "Unavailable" || saga.IsPermanent(err) {
			t.Fatalf("attempt %d of a broken step returned %v, want a retryable Unavailable", a, err)
		}
	}
	if err := chaos.Fix(dir, "s", "h"); err != nil {
		t.Fatal(err)
	}
	call.Attempt = 3
	if _, err := reg.Invoke(ctx, call); err != nil {
		t.Fatalf("attempt 3, once fixed: %v", err)
	}
	entries, err := l.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byPhase := map[string]chaos.Entry{}
	for _, e := range entries["s"] {
		byPhase[e.Phase] = e
	}
	refused, done := byPhase["refused"], byPhase["do"]
	if len(entries["s"]) != 2 || refused.Key != "s/h/1" || refused.Calls != 2 || !slices.Equal(refused.Attempts, []int{1, 2}) ||
		done.Key != "s/h/1" || done.Calls != 1 || !done.Returned || !slices.Equal(done.Attempts, []int{3}) {
		t.Fatalf("ledger %+v, want two refusals (attempts 1, 2) and one effect (attempt 3) under key s/h/1", entries)
	}
}
