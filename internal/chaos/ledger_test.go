package chaos_test

import (
	"context"
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
