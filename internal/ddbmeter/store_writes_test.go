package ddbmeter_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/smithy-go/middleware"

	"github.com/lambdasaga/lambdasaga/durable"
	"github.com/lambdasaga/lambdasaga/internal/accounting"
	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/ddbmeter"
	"github.com/lambdasaga/lambdasaga/store/dynamo"
)

// meteredStore is a store on a fresh table (its name prefix given) whose
// requests pass through a wire meter on the emulator, and through the
// SDK options given.
func meteredStore(t *testing.T, prefix string, options ...func(*middleware.Stack) error) (*ddbmeter.Meter, *dynamo.Store) {
	t.Helper()
	meter, err := ddbmeter.New(ddbmeter.Config{Backend: awslocal.Endpoint(t, awslocal.EnvDynamoDB)})
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(meter)
	t.Cleanup(proxy.Close)
	client := awslocal.DynamoDB(proxy.URL, options...)
	var r [6]byte
	_, _ = rand.Read(r[:])
	table := prefix + hex.EncodeToString(r[:])
	if err := dynamo.CreateTable(context.Background(), client, table); err != nil {
		t.Fatal(err)
	}
	st, err := dynamo.New(dynamo.Config{Client: client, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return meter, st
}

// TestWireMeterAgreesWithMiddlewareOnStoreWrites
// drives the store's writes that sagactl run never makes through both
// meters at once: the sweep's re-send count (UpdateItem SET rs), and the
// writes whose condition fails (a duplicate start, a stale update, a stale
// re-send count), which happen whenever a message is redelivered. DynamoDB
// bills a lost condition the existing item's size, at least 1 unit
// (Developer Guide, "Condition expressions": "If the ConditionExpression
// evaluates to false, DynamoDB still consumes write capacity from the
// table"). Both meters bill them, on these small items alike. (The
// middleware once counted them unbilled, since dynalite returns no item
// with the failure, leaving the units of every conflict out.)
func TestWireMeterAgreesWithMiddlewareOnStoreWrites(t *testing.T) {
	t.Parallel()
	counter := accounting.New()
	meter, st := meteredStore(t, "r2-", counter.Register)
	ctx := context.Background()
	now := time.Now()
	rec := durable.SagaRecord{SagaID: "r2", Version: 1, Status: durable.StatusRunning, Name: "order", DefinitionHash: "h",
		CreatedAt: now, StatusSince: now, UpdatedAt: now, State: make([]byte, 300)}
	if err := st.SagaCreate(ctx, &durable.SagaCreateParams{Record: rec}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		op   string // the write's operation
		do   func() error
		want error // what the store answers
	}{
		{"the sweep counts a re-send", "DynamoDB.UpdateItem", func() error {
			return st.SagaSetResends(ctx, &durable.SagaSetResendsParams{SagaID: "r2", Version: 1, From: 0, To: 1})
		}, nil},
		{"a duplicate start", "DynamoDB.PutItem", func() error {
			return st.SagaCreate(ctx, &durable.SagaCreateParams{Record: rec})
		}, durable.ErrExists},
		{"a stale update", "DynamoDB.PutItem", func() error {
			next := rec
			next.Version = 3
			return st.SagaUpdate(ctx, &durable.SagaUpdateParams{Record: next, ExpectedVersion: 2})
		}, durable.ErrConflict},
		{"a stale re-send count", "DynamoDB.UpdateItem", func() error {
			return st.SagaSetResends(ctx, &durable.SagaSetResendsParams{SagaID: "r2", Version: 1, From: 0, To: 1})
		}, durable.ErrConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			meter.Reset()
			counter.Reset()
			if err := c.do(); !errors.Is(err, c.want) && (err != nil || c.want != nil) {
				t.Fatalf("store: %v, want %v", err, c.want)
			}
			w, m := meter.Snapshot()[c.op], counter.Snapshot()[c.op]
			if w.Calls != 1 || w.Unbilled != 0 || w.BilledWriteUnits < 1 {
				t.Errorf("wire: %+v, want 1 call billed at least 1 write unit", w)
			}
			if w.Calls != m.Calls || w.BilledWriteUnits != m.BilledWriteUnits || w.BilledIndexWriteUnits != m.BilledIndexWriteUnits || w.Unbilled != m.Unbilled {
				t.Errorf("%s: wire %+v, middleware %+v", c.op, w, m)
			}
		})
	}
}
