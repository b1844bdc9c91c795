package chaos_test

import (
	"context"
	"os"
	"testing"

	"github.com/lambdasaga/lambdasaga/engine"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/chaos"
	"github.com/lambdasaga/lambdasaga/saga"
)

// The ledger records an effect once per key and counts every call: the kill
// test's duplicate figure depends on it.
func TestLedgerCountsDuplicateCalls(t *testing.T) {
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	ctx := context.Background()
	l := &chaos.Ledger{Client: awslocal.DynamoDB(dyn), Table: "ledger-test-" + t.Name()}
	if err := l.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry()
	l.Register(reg)
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
	dyn := awslocal.Endpoint(t, awslocal.EnvDynamoDB)
	ctx := context.Background()
	dir := t.TempDir()
	l := &chaos.Ledger{Client: awslocal.DynamoDB(dyn), Table: "ledger-test-" + t.Name(), TokenDir: dir}
	if err := l.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry()
	l.Register(reg)
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
